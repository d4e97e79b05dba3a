//! The bevy_ecs adapter: components, resources and systems over the engine-agnostic core.
//!
//! A thin layer (feature `ecs`, on by default): every system only moves data between
//! components and the core's explicit calls ([`Cloth::step_with`], [`Attachments::apply`],
//! [`ColliderSet::set_pose`]). Add a [`ClothSim`] (plus a [`ClothRenderMesh`] to read back) to a
//! cloth entity, [`BonePose`] (and optionally [`BoneCollider`]) to the character's bone entities,
//! [`ClothAttachments`] to hang the cloth from bones; insert a [`ClothConfig`] resource (a
//! [`ClothConfigOverride`] component overrides it per cloth) and call [`add_cloth_systems`] on the
//! schedule that runs at the fixed timestep [`ClothConfig::timestep`].
//!
//! Systems run in three chained, step-numbered sets ([`ClothSystems`]):
//! 1. [`ClothSystems::S1GatherPoses`]: the tick's clock starts ([`begin_cloth_tick`]), bone
//!    colliders into the shared [`ClothColliders`] set, the level-of-detail plan (with a
//!    [`ClothLod`]), attachments into pin targets (and teleports, inertia scaling, which a
//!    cloth following its skin this tick does without);
//! 2. [`ClothSystems::S2Step`]: every cloth steps one fixed tick, cloths in parallel (rayon);
//! 3. [`ClothSystems::S3WriteMeshes`]: render positions and normals into [`ClothRenderMesh`],
//!    then the tick's clock stops and the budget learns from it ([`end_cloth_tick`]).
//!
//! ```
//! use bevy_ecs::prelude::*;
//! use isocloth::ecs::*;
//! use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverSettings};
//!
//! let mut world = World::new();
//! init_cloth_resources(&mut world); // ClothConfig (budget, gravity, contact, air) + colliders
//! let mut fixed_update = Schedule::default();
//! add_cloth_systems(&mut fixed_update);
//!
//! // A banner pinned along its top edge, on a game entity.
//! let mesh = ClothMesh::new(&BaseMesh::rectangle(1.0, 1.5, 8, 12)?)?;
//! let top: Vec<u32> = (0..=8).map(|i| BaseMesh::grid_index(8, i, 12)).collect();
//! let pins = mesh.nodes_for_vertices(&top, true);
//! let cloth = Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default())?;
//! let banner = world.spawn((ClothSim::new(cloth), ClothRenderMesh::default())).id();
//!
//! for _tick in 0..60 {
//!     fixed_update.run(&mut world); // once per 1/60 s tick
//! }
//! let mesh = world.get::<ClothRenderMesh>(banner).unwrap(); // upload positions, normals
//! assert_eq!(mesh.positions.len(), mesh.normals.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;

use bevy_ecs::prelude::*;
use glam::{DVec3, Vec3};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::aero::Aerodynamics;
use crate::attachment::{AttachError, Attachments, SkinUse};
use crate::cloth::{Cloth, StepReport};
use crate::collision::{
    ColliderId, ColliderSet, ColliderShape, CollisionGroups, ContactSettings, Pose,
};
use crate::counters::StepCounters;
use crate::energy::SolverWeights;
use crate::error::ClothError;
use crate::layering::{ClothLayers, HoldsCloth};
use crate::layers::{LayerError, LayerSettings};
use crate::limits::LimitSettings;
use crate::load::{checked, count, positive, vector};
use crate::lod::{ClothBudget, FrameTrim, LodId, LodModels, LodScheduler, Rung};
use crate::model::{SolverMethod, SolverSettings};
use crate::self_contact::SelfCollisionSettings;
use crate::strain_cap::StrainCap;

/// The simulated cloth of an entity (a cape, a banner, a skirt).
///
/// The systems configure the cloth on every tick from the [`ClothConfig`] resource, or from the
/// entity's [`ClothConfigOverride`]. That sets the budget, timestep, gravity, contact settings
/// and air. A change of budget or timestep refactors the matrix. From the settings the cloth was
/// built with, only the integrator and the catch-up frames are kept.
#[derive(Component, Debug)]
pub struct ClothSim {
    /// The core cloth, stepped by [`ClothSystems::S2Step`].
    pub cloth: Cloth,
    /// What the last tick that stepped this cloth did.
    pub last_step: StepReport,
    /// Whether the last tick stepped this cloth (else `last_step` is an earlier tick's: a
    /// cloth on a rung that follows the skin, or one whose step failed).
    pub stepped: bool,
    /// The last error the step returned (the cloth is then left as it was), if any.
    pub last_error: Option<ClothError>,
}

impl ClothSim {
    /// Wraps a core cloth.
    pub fn new(cloth: Cloth) -> Self {
        Self {
            cloth,
            last_step: StepReport::default(),
            stepped: false,
            last_error: None,
        }
    }
}

/// What the last tick's cloth step did, summed over the cloths it stepped (a [`Resource`],
/// written by [`count_cloth_work`] at the end of [`ClothSystems::S2Step`]): the per-stage counts
/// and [`StepCounters::work`], a figure a game can plan a frame on where wall time on a shared
/// machine cannot be.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq)]
pub struct ClothTickCounters {
    /// The counts of every cloth stepped this tick, summed.
    pub counters: StepCounters,
    /// Cloths stepped this tick.
    pub cloths: u32,
    /// Cloths whose step a bound degraded ([`StepCounters::degraded`]).
    pub degraded: u32,
}

impl ClothTickCounters {
    /// The tick's work ([`StepCounters::work`] of the summed counts).
    pub fn work(&self) -> f64 {
        self.counters.work()
    }
}

/// The world pose of a bone entity, written by the game's animation each tick before the cloth
/// systems run.
#[derive(Component, Debug, Clone, Copy, PartialEq, Default)]
pub struct BonePose(pub Pose);

/// A collision shape carried by a bone entity (its [`BonePose`] times `offset`).
#[derive(Component, Debug, Clone, PartialEq)]
pub struct BoneCollider {
    /// The shape, in the frame `bone pose * offset`.
    pub shape: ColliderShape,
    /// Offset of the shape from the bone.
    pub offset: Pose,
}

/// Collision groups ([`CollisionGroups`]) of a cloth or a body entity. On a cloth entity: which
/// bodies the cloth meets (replacing [`ClothConfig::contact`]'s `groups` for it); on an entity
/// with a collider: the body's groups. Without it both are in every group and meet every group.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClothCollisionGroups(pub CollisionGroups);

/// Nodes of this entity's cloth hung from bone entities. `bones[k]` is the entity whose
/// [`BonePose`] drives influence bone `k` of `attachments`.
#[derive(Component, Debug)]
pub struct ClothAttachments {
    /// Bone entities, indexed by the influences' bone numbers.
    pub bones: Vec<Entity>,
    /// The bound attachments (see [`Attachments::bind`]).
    pub attachments: Attachments,
    /// The last error (a missing bone entity, a bad pose), if any; the pins then keep their
    /// previous targets.
    pub last_error: Option<AttachError>,
}

impl ClothAttachments {
    /// Attachments driven by the bone entities `bones`, with no error yet.
    pub fn new(bones: Vec<Entity>, attachments: Attachments) -> Self {
        Self {
            bones,
            attachments,
            last_error: None,
        }
    }
}

/// Render data the engine uploads: one vertex per cloth node, f32.
#[derive(Component, Debug, Clone, Default)]
pub struct ClothRenderMesh {
    /// Vertex positions.
    pub positions: Vec<Vec3>,
    /// Area-weighted vertex normals.
    pub normals: Vec<Vec3>,
    /// Triangle indices, three per triangle (written once).
    pub indices: Vec<u32>,
}

/// Whether the game draws a cloth entity's mesh this tick (a component; a cloth without one is
/// drawn). A cloth the game culls (off screen, hidden) gets no render positions or normals
/// ([`write_render_meshes`] keeps the last ones) until it is drawn again; it is stepped as
/// before, so it comes back where its character is. Set it from the engine's visibility (the
/// Bevy plugin does the same for its meshes).
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClothDrawn(pub bool);

impl Default for ClothDrawn {
    fn default() -> Self {
        Self(true)
    }
}

/// A solver budget for a class of platform: substeps x iterations per fixed tick. Serde (RON)
/// loadable; see [`BudgetPreset::mobile`], [`BudgetPreset::console`], [`BudgetPreset::desktop`]
/// and the files under `presets/`.
///
/// Reading one checks each count as it is read and refuses unknown fields, also inside
/// `method` (`Anderson(history: 5)`), so that an error points at the value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetPreset {
    /// A name for tools and logs.
    pub name: String,
    /// Substeps per tick (1..=[`SolverSettings::MAX_SUBSTEPS`]).
    #[serde(deserialize_with = "count::<_, 1, { SolverSettings::MAX_SUBSTEPS }>")]
    pub substeps: u32,
    /// Iterations per substep (1..=[`SolverSettings::MAX_ITERATIONS`]).
    #[serde(deserialize_with = "count::<_, 1, { SolverSettings::MAX_ITERATIONS }>")]
    pub iterations: u32,
    /// Solver.
    #[serde(deserialize_with = "StrictSolverMethod::deserialize")]
    pub method: SolverMethod,
    /// The strain cap at the end of each substep: its tolerance, and its steps and
    /// conjugate-gradient iterations (the cap's part of the budget; [`crate::strain_cap`]).
    /// Default [`StrainCap::default`] (3 %, at most 16 steps of 20 within 24 work units a
    /// node) in every shipped preset; a file without it gets that default. A per-cloth tolerance goes in that cloth's
    /// [`ClothConfigOverride`].
    #[serde(deserialize_with = "checked")]
    pub strain_cap: StrainCap,
    /// The weights the iterations converge with in this budget ([`SolverWeights`]). Default
    /// [`SolverWeights::default`] (the stiff weights) in every shipped preset; a file without it
    /// gets that default. `weights: (isometry: 3e3, render_edge: 1e3)` is
    /// [`SolverWeights::SOFT`], an opt-in (see its docs).
    #[serde(deserialize_with = "checked")]
    pub weights: SolverWeights,
}

/// [`SolverMethod`] as files write it, refusing unknown fields in `Anderson` and checking its
/// history as it is read. (`SolverMethod` itself lives in `model.rs`; this mirror is checked
/// against it by the compiler.)
#[derive(Deserialize)]
#[serde(remote = "SolverMethod", deny_unknown_fields)]
enum StrictSolverMethod {
    LocalGlobal,
    Newton,
    Anderson {
        #[serde(deserialize_with = "count::<_, 1, 16>")]
        history: u32,
    },
}

impl Default for BudgetPreset {
    fn default() -> Self {
        Self::console()
    }
}

impl BudgetPreset {
    /// Phones: 1 substep x 5 iterations of the accelerated local-global map
    /// ([`SolverMethod::Anderson`]).
    pub fn mobile() -> Self {
        Self {
            name: "mobile".into(),
            substeps: 1,
            iterations: 5,
            method: SolverMethod::Anderson { history: 5 },
            strain_cap: StrainCap::default(),
            weights: SolverWeights::default(),
        }
    }

    /// Consoles: the crate's default, 2 x 5 of the accelerated local-global map.
    pub fn console() -> Self {
        let s = SolverSettings::default();
        Self {
            name: "console".into(),
            substeps: s.substeps,
            iterations: s.iterations,
            method: s.method,
            strain_cap: s.strain_cap,
            weights: s.weights,
        }
    }

    /// Desktop PCs: 4 x 10 of the accelerated local-global map.
    pub fn desktop() -> Self {
        Self {
            name: "desktop".into(),
            substeps: 4,
            iterations: 10,
            method: SolverMethod::Anderson { history: 5 },
            strain_cap: StrainCap::default(),
            weights: SolverWeights::default(),
        }
    }

    /// The converged reference every preset is measured against (`presets/reference.ron`):
    /// 32 x 20 of the accelerated local-global map at the stiff weights
    /// ([`SolverWeights::STIFF`]), the converged inextensible cloth. Dozens of times a
    /// console's cost: for measuring, not for games.
    pub fn reference() -> Self {
        let c = crate::tuning::Candidate::converged();
        Self {
            name: "reference".into(),
            substeps: c.substeps,
            iterations: c.iterations,
            method: c.method,
            strain_cap: StrainCap::default(),
            weights: c.weights,
        }
    }

    /// Parses a preset from RON text, for example
    /// `(name: "handheld", substeps: 2, iterations: 4, method: LocalGlobal)`. A refusal names
    /// the line, column and field path of the value at fault.
    pub fn from_ron(text: &str) -> Result<Self, ClothError> {
        let p: Self = crate::load::ron(text).map_err(|e| ClothError::InvalidSetting {
            name: "preset",
            reason: format!("RON: {e}"),
        })?;
        p.settings(1.0 / 60.0, DVec3::new(0.0, -9.81, 0.0))?;
        Ok(p)
    }

    /// Solver settings for this budget at a fixed `timestep` and `gravity` (validated).
    pub fn settings(&self, timestep: f64, gravity: DVec3) -> Result<SolverSettings, ClothError> {
        let s = SolverSettings {
            frame_time: timestep,
            substeps: self.substeps,
            iterations: self.iterations,
            method: self.method,
            gravity,
            strain_cap: self.strain_cap,
            weights: self.weights,
            ..Default::default()
        };
        s.validate()?;
        Ok(s)
    }
}

/// Settings for every cloth (a [`Resource`]); a [`ClothConfigOverride`] on an entity replaces
/// them for that cloth. Serde-loadable. Defaults: the console budget, 1/60 s, standard gravity,
/// default contact, no air. Reading one checks each part as it is read and refuses unknown
/// fields at every level, so that an error points at the value.
#[derive(Resource, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClothConfig {
    /// Budget per tick.
    pub budget: BudgetPreset,
    /// Fixed tick length in seconds (the schedule must run at this rate), at most 1. Default
    /// 1/60.
    #[serde(deserialize_with = "positive::<_, 1>")]
    pub timestep: f64,
    /// Gravity in m/s^2, each component at most 1e4 in magnitude. Default (0, -9.81, 0).
    #[serde(deserialize_with = "vector::<_, 10_000>")]
    pub gravity: DVec3,
    /// Contact thickness and friction.
    #[serde(deserialize_with = "checked")]
    pub contact: ContactSettings,
    /// Wind, drag, lift, damping.
    #[serde(deserialize_with = "checked")]
    pub aero: Aerodynamics,
    /// A bone collider moving farther than this in one tick (metres, at most 1e4) is
    /// teleported, not swept through the space between. Default 1 m (60 m/s at 60 Hz).
    #[serde(deserialize_with = "positive::<_, 10_000>")]
    pub collider_teleport_distance: f64,
    /// Game constraints and sleeping (default: none, never asleep). Per-node arrays must fit
    /// every cloth the config applies to: give them in a [`ClothConfigOverride`].
    #[serde(deserialize_with = "checked")]
    pub limits: LimitSettings,
    /// The cloth against itself (default: off; see [`crate::self_contact`]).
    #[serde(deserialize_with = "checked")]
    pub self_collision: SelfCollisionSettings,
}

impl Default for ClothConfig {
    fn default() -> Self {
        Self {
            budget: BudgetPreset::default(),
            timestep: 1.0 / 60.0,
            gravity: DVec3::new(0.0, -9.81, 0.0),
            contact: ContactSettings::default(),
            aero: Aerodynamics::default(),
            collider_teleport_distance: 1.0,
            limits: LimitSettings::default(),
            self_collision: SelfCollisionSettings::default(),
        }
    }
}

impl ClothConfig {
    /// Checks every setting: the budget at this timestep and gravity, contact, air, limits,
    /// self-collision, and a finite positive teleport distance.
    pub fn validate(&self) -> Result<(), ClothError> {
        self.budget.settings(self.timestep, self.gravity)?;
        self.contact.validate()?;
        self.aero.validate()?;
        self.limits.validate()?;
        self.self_collision.validate()?;
        crate::error::positive(
            "collider_teleport_distance",
            self.collider_teleport_distance,
        )
    }

    /// Parses a configuration from RON text (missing fields take their defaults) and
    /// validates it, for example `(budget: (name: "phone", substeps: 1, iterations: 5, method:
    /// LocalGlobal), contact: (friction: 0.5))`. A refusal names the line, column and field
    /// path of the value at fault.
    pub fn from_ron(text: &str) -> Result<Self, ClothError> {
        let c: Self = crate::load::ron(text).map_err(|e| ClothError::InvalidSetting {
            name: "config",
            reason: format!("RON: {e}"),
        })?;
        c.validate()?;
        Ok(c)
    }
}

/// Per-entity replacement of the [`ClothConfig`] resource.
#[derive(Component, Debug, Clone, PartialEq)]
pub struct ClothConfigOverride(pub ClothConfig);

/// The kinematic bodies of this tick, gathered from collider entities ([`BoneCollider`], or an
/// engine adapter's own component) by [`ClothColliders::gather`].
#[derive(Resource, Debug, Default)]
pub struct ClothColliders {
    /// The set every cloth collides with.
    pub set: ColliderSet,
    ids: HashMap<Entity, ColliderId>,
    /// Entities posed this tick (sorted by `end_tick`).
    seen: Vec<Entity>,
    /// Colliders skipped this tick because of bad data (entity and why).
    pub skipped: Vec<(Entity, String)>,
}

impl ClothColliders {
    /// This tick's colliders, one `(entity, shape, world pose)` per collider entity: the last
    /// tick's end poses become the start poses; each entity's collider is added the first time
    /// it is seen, then posed (teleported instead of swept when it jumps farther than
    /// `teleport_distance`); bad data is skipped and reported in [`ClothColliders::skipped`]
    /// (the collider keeps its last pose); the colliders of entities not seen this tick
    /// (despawned, or no longer carrying a collider) leave the set.
    pub fn gather(
        &mut self,
        colliders: impl IntoIterator<Item = (Entity, ColliderShape, Pose)>,
        teleport_distance: f64,
    ) {
        self.gather_grouped(
            colliders
                .into_iter()
                .map(|(e, s, p)| (e, s, p, CollisionGroups::ALL)),
            teleport_distance,
        );
    }

    /// [`ClothColliders::gather`] with each collider's [`CollisionGroups`].
    pub fn gather_grouped(
        &mut self,
        colliders: impl IntoIterator<Item = (Entity, ColliderShape, Pose, CollisionGroups)>,
        teleport_distance: f64,
    ) {
        self.begin_tick();
        for (entity, shape, world, groups) in colliders {
            self.pose(entity, shape, world, teleport_distance);
            if let Some(&id) = self.ids.get(&entity) {
                let _ = self.set.set_groups(id, groups);
            }
        }
        self.end_tick();
    }

    /// The collider of `entity` in [`ClothColliders::set`], if it has one.
    pub fn collider_of(&self, entity: Entity) -> Option<ColliderId> {
        self.ids.get(&entity).copied()
    }

    /// What the colliders of the entities `bones` are: a hash of each one's collider and its
    /// [`ColliderSet::stamp`] (none for a bone without one). It changes when one of them is
    /// added, removed or regrouped, not when other colliders are.
    pub fn stamp_of(&self, bones: &[Entity]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for &b in bones {
            self.collider_of(b)
                .map(|id| (id, self.set.stamp(id)))
                .hash(&mut h);
        }
        h.finish()
    }

    /// Starts a tick: the last frame's end poses become the start poses, and the skipped list
    /// empties.
    fn begin_tick(&mut self) {
        self.set.finish_frame();
        self.skipped.clear();
        self.seen.clear();
    }

    /// Poses the collider of `entity` at `world` (adding it the first time the entity is seen).
    fn pose(&mut self, entity: Entity, shape: ColliderShape, world: Pose, teleport_distance: f64) {
        self.seen.push(entity);
        let result = match self.ids.get(&entity) {
            Some(&id) => self.set.set_shape(id, shape).and_then(|_| {
                let far = self
                    .set
                    .pose(id)
                    .is_some_and(|p| p.translation.distance(world.translation) > teleport_distance);
                if far {
                    self.set.teleport(id, world)
                } else {
                    self.set.set_pose(id, world)
                }
            }),
            None => self.set.add(shape, world).map(|id| {
                self.ids.insert(entity, id);
            }),
        };
        if let Err(e) = result {
            self.skipped.push((entity, e.to_string()));
        }
    }

    /// Ends the gathering: the colliders of entities not posed this tick leave the set.
    fn end_tick(&mut self) {
        self.seen.sort_unstable();
        let (seen, set) = (&self.seen, &mut self.set);
        self.ids.retain(|e, id| {
            let keep = seen.binary_search(e).is_ok();
            if !keep {
                let _ = set.remove(*id);
            }
            keep
        });
    }
}

/// Marks a cloth entity as a layer that meets the other layers ([`crate::layers`]): every two
/// `ClothLayer` cloths whose [`ClothCollisionGroups`] meet (all do by default) keep the
/// [`ClothLayering`] thickness apart and never pass through each other. `order` is the layer
/// order, inner first (a skirt 0, the cape over it 1); equal orders go by entity.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClothLayer {
    /// Inner layers step first; outer ones follow them. Default 0.
    pub order: u32,
}

/// Layers in the ECS layer (a [`Resource`]: insert one to turn them on for the
/// [`ClothLayer`] entities): their settings, and the frame's stages ([`ClothLayers`]), rebuilt
/// when the layered entities or their groups change. [`step_cloths`] steps each layer group
/// as one system (the groups in parallel with each other and with every other cloth). With a
/// [`ClothLod`], the layered cloths step in their groups, each at its rung's model, when every
/// layered cloth is on a rung simulated every tick; the groups' time, shared by node count,
/// feeds the scheduler's estimates. Otherwise (a layered cloth on a half-rate rung, following
/// the skin, or catching up) every layered cloth ticks alone at its rung that tick, without
/// layers.
#[derive(Resource, Debug, Default)]
pub struct ClothLayering {
    /// How the layers meet (validated when the layers are built; a bad setting leaves every
    /// cloth stepping without layers and is reported in `error`).
    pub settings: LayerSettings,
    layers: Option<ClothLayers>,
    /// The layered entities in layer order, with their groups, when the layers were built.
    built_for: Vec<(Entity, CollisionGroups)>,
    /// Scratch of a tick: the layered entities in layer order (order, entity, groups, index
    /// among the stepped cloths), each stepped cloth's place in that order, and the reverse.
    entities: Vec<(u32, Entity, CollisionGroups, usize)>,
    place: Vec<Option<usize>>,
    order: Vec<usize>,
    /// Scratch of a tick: each layered cloth's report.
    reports: Vec<StepReport>,
    /// The last error building the layers, if any.
    pub error: Option<LayerError>,
}

impl ClothLayering {
    /// Layers with `settings`.
    pub fn new(settings: LayerSettings) -> Self {
        Self {
            settings,
            ..Default::default()
        }
    }

    /// The pairs of layered cloths that came near each other in the last tick, as entities.
    pub fn near_pairs(&self) -> Vec<[Entity; 2]> {
        let Some(layers) = &self.layers else {
            return Vec::new();
        };
        layers
            .near_pairs()
            .iter()
            .map(|&[a, b]| [self.built_for[a].0, self.built_for[b].0])
            .collect()
    }

    /// Whether the last tick's layers degraded: a layer group met more pairs in a substep
    /// than [`LayerSettings::max_pairs`] (see [`ClothLayers::degraded`]).
    pub fn degraded(&self) -> bool {
        self.layers.as_ref().is_some_and(ClothLayers::degraded)
    }
}

/// The cloth systems' sets, run in this order.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClothSystems {
    /// 1: gather bone and collider poses, drive attachments.
    S1GatherPoses,
    /// 2: step every cloth one fixed tick (in parallel across cloths).
    S2Step,
    /// 3: write render positions and normals.
    S3WriteMeshes,
}

/// Adds the cloth systems, in their chained sets, to `schedule` (run it once per fixed tick),
/// and nothing else. Needs the [`ClothConfig`] and [`ClothColliders`] resources (see
/// [`init_cloth_resources`]).
pub fn add_cloth_systems(schedule: &mut Schedule) {
    schedule.configure_sets(
        (
            ClothSystems::S1GatherPoses,
            ClothSystems::S2Step,
            ClothSystems::S3WriteMeshes,
        )
            .chain(),
    );
    schedule.add_systems(
        (
            begin_cloth_tick,
            gather_colliders,
            plan_cloth_lod,
            drive_attachments,
            exclude_pin_bodies,
        )
            .chain()
            .in_set(ClothSystems::S1GatherPoses),
    );
    schedule.add_systems(
        (step_cloths, count_cloth_work)
            .chain()
            .in_set(ClothSystems::S2Step),
    );
    schedule.add_systems(
        (write_render_meshes, end_cloth_tick)
            .chain()
            .in_set(ClothSystems::S3WriteMeshes),
    );
}

/// First in S1 (with a [`ClothLod`] resource): the tick's cloth schedule starts now (see
/// [`ClothLod::last_tick_ms`]).
pub fn begin_cloth_tick(lod: Option<ResMut<ClothLod>>) {
    if let Some(mut lod) = lod {
        lod.tick_start = Some(std::time::Instant::now());
    }
}

/// Last in S3 (with a [`ClothLod`] resource): the tick's whole cloth schedule, from
/// [`begin_cloth_tick`], is what the budget learns from ([`FrameTrim::record_tick`]): the
/// step's wall-clock time against the plan's estimate, and the rest of the tick taken off the
/// budget, so that the schedule's 99th percentile, not only the step's, stays within
/// [`ClothBudget::frame_ms`].
pub fn end_cloth_tick(lod: Option<ResMut<ClothLod>>) {
    let Some(mut lod) = lod else {
        return;
    };
    let Some(start) = lod.tick_start else {
        return;
    };
    let ms = start.elapsed().as_secs_f64() * 1e3;
    lod.last_tick_ms = ms;
    let lod = &mut *lod;
    let planned = lod.scheduler.planned_ms();
    let step = lod.last_wall_ms.min(ms);
    lod.trim
        .record_tick(ms, step, planned, lod.scheduler.budget());
}

/// Spawns one entity per bone of the procedural character ([`crate::rig`]) at `poses`, each
/// with its [`BonePose`] and, where the bone has one, its [`BoneCollider`]. Returns the
/// entities in bone order (the order [`ClothAttachments::bones`] expects).
pub fn spawn_character_bones(world: &mut World, poses: &[Pose]) -> Vec<Entity> {
    poses
        .iter()
        .enumerate()
        .map(|(b, pose)| {
            let mut e = world.spawn(BonePose(*pose));
            if let Some((shape, offset)) = crate::rig::CharacterRig::bone_collider(b) {
                e.insert(BoneCollider { shape, offset });
            }
            e.id()
        })
        .collect()
}

/// The entities of [`spawn_demo_character`].
#[derive(Debug, Clone)]
pub struct DemoCharacter {
    /// One entity per bone of [`crate::rig::BONES`], in order.
    pub bones: Vec<Entity>,
    /// The cape: [`ClothSim`], [`ClothAttachments`] and [`ClothRenderMesh`].
    pub cape: Entity,
}

/// Spawns the procedural character of [`crate::rig`] at its current pose (bone entities with
/// their colliders) and its demo cape ([`crate::rig::demo_cape`] with `settings`), skinned to
/// the shoulders with [`crate::rig::demo_cape_attachments`]. For demos, soak tests and tuning.
/// From the first tick the budget, timestep and gravity come from the config, as for any
/// [`ClothSim`]. Pass settings that match it to avoid a refactorisation on that tick.
pub fn spawn_demo_character(
    world: &mut World,
    character: &crate::rig::CharacterRig,
    settings: SolverSettings,
) -> Result<DemoCharacter, AttachError> {
    let cloth = crate::rig::demo_cape(settings).map_err(AttachError::Cloth)?;
    spawn_character_with_cape(world, character, cloth)
}

/// [`spawn_demo_character`] with `cloth` as the cape: a demo cape ([`crate::rig::demo_cape`]'s
/// mesh) in any state, for example a copy of one already draped and moved to the character
/// (a crowd spawning capes pre-draped), skinned to the shoulders at the character's pose.
pub fn spawn_character_with_cape(
    world: &mut World,
    character: &crate::rig::CharacterRig,
    cloth: Cloth,
) -> Result<DemoCharacter, AttachError> {
    let mut poses = Vec::new();
    character.poses(&mut poses);
    let attachments = crate::rig::demo_cape_attachments(&cloth, &poses)?;
    let bones = spawn_character_bones(world, &poses);
    let cape = world
        .spawn((
            ClothSim::new(cloth),
            ClothAttachments::new(bones.clone(), attachments),
            ClothRenderMesh::default(),
        ))
        .id();
    Ok(DemoCharacter { bones, cape })
}

/// Inserts default [`ClothConfig`] and [`ClothColliders`] resources where missing.
pub fn init_cloth_resources(world: &mut World) {
    if !world.contains_resource::<ClothConfig>() {
        world.insert_resource(ClothConfig::default());
    }
    if !world.contains_resource::<ClothColliders>() {
        world.insert_resource(ClothColliders::default());
    }
    if !world.contains_resource::<ClothTickCounters>() {
        world.insert_resource(ClothTickCounters::default());
    }
}

/// Last in S2 (with a [`ClothTickCounters`] resource): the tick's counts, summed over the
/// cloths [`step_cloths`] stepped.
pub fn count_cloth_work(cloths: Query<&ClothSim>, counters: Option<ResMut<ClothTickCounters>>) {
    let Some(mut out) = counters else {
        return;
    };
    let mut sum = ClothTickCounters::default();
    for sim in cloths.iter().filter(|s| s.stepped) {
        sum.counters += sim.last_step.counters;
        sum.cloths += 1;
        sum.degraded += u32::from(sim.last_step.counters.degraded());
    }
    *out = sum;
}

/// S1: poses the shared collider set from the bone colliders ([`ClothColliders::gather`]). New
/// bones are added, bad data is skipped and reported in [`ClothColliders::skipped`] (the
/// collider keeps its last pose), and a despawned bone's collider leaves the set. A bone that
/// moved farther than [`ClothConfig::collider_teleport_distance`] in one tick is teleported
/// rather than swept: a body swept 100 m through the cloth's new place would push every node it
/// passes (measured in the soak: mean strain 285 % after a teleport).
pub fn gather_colliders(
    bones: Query<(
        Entity,
        &BonePose,
        &BoneCollider,
        Option<&ClothCollisionGroups>,
    )>,
    config: Res<ClothConfig>,
    mut colliders: ResMut<ClothColliders>,
) {
    colliders.gather_grouped(
        bones.iter().map(|(entity, pose, c, groups)| {
            (
                entity,
                c.shape.clone(),
                pose.0.mul(&c.offset),
                groups.map_or(CollisionGroups::ALL, |g| g.0),
            )
        }),
        config.collider_teleport_distance,
    );
}

/// S1 (after the attachments): the nodes each cloth's pins hold, and the rings around them,
/// are not pushed by the bodies of the bones that hold them where those bodies already hold
/// them (the node inside the body's contact layer when computed;
/// [`crate::AttachmentSettings::unpushed_rings`], [`Attachments::body_exclusions`]). Computed
/// again only when the collider set's membership or the pins change.
pub fn exclude_pin_bodies(
    mut cloths: Query<(Entity, &mut ClothSim, &ClothAttachments)>,
    colliders: Res<ClothColliders>,
    mut keys: Local<HashMap<Entity, u64>>,
) {
    let mut seen = 0;
    for (entity, mut sim, att) in &mut cloths {
        seen += 1;
        update_pin_exclusions(
            entity,
            &mut sim,
            &att.bones,
            &att.attachments,
            &colliders,
            &mut keys,
        );
    }
    // Despawned cloths leave their keys behind: drop them (no state grows under churn).
    if keys.len() > seen {
        keys.retain(|e, _| cloths.contains(*e));
    }
}

/// Sets `sim`'s body exclusions from its `attachments` (driven by the bone entities `bones`)
/// against `colliders`, unless `keys` shows nothing they depend on changed since the last time
/// for `entity` ([`exclusion_key`]). An error goes to [`ClothSim::last_error`]. What
/// [`exclude_pin_bodies`] does per cloth, for engine adapters with their own bone components.
pub fn update_pin_exclusions(
    entity: Entity,
    sim: &mut ClothSim,
    bones: &[Entity],
    attachments: &Attachments,
    colliders: &ClothColliders,
    keys: &mut HashMap<Entity, u64>,
) {
    let key = exclusion_key(colliders.stamp_of(bones), bones, attachments);
    if keys.get(&entity) == Some(&key) || sim.cloth.pins() != attachments.nodes() {
        return;
    }
    let (x, thickness) = (
        sim.cloth.positions(),
        sim.cloth.contact_settings().thickness,
    );
    let exclusions = attachments.body_exclusions(
        &sim.cloth,
        |bone| {
            bones
                .get(bone as usize)
                .and_then(|&e| colliders.collider_of(e))
                .into_iter()
                .collect()
        },
        |node, id| {
            colliders
                .set
                .signed_distance(id, x[node as usize])
                .is_some_and(|d| d < thickness)
        },
    );
    match exclusions.and_then(|x| sim.cloth.set_body_exclusions(x)) {
        Ok(()) => {
            keys.insert(entity, key);
        }
        Err(e) => sim.last_error = Some(e),
    }
}

/// What a cloth's body exclusions depend on: its bones' colliders (`stamp`,
/// [`ClothColliders::stamp_of`] the bones), the bone entities, the attached nodes and the ring
/// count. (Keyed on the whole set's revision, every cloth of a crowd computed its exclusions
/// again whenever any character came or went: 2 ms of a 4 ms tick on `crowd`, every second.)
pub fn exclusion_key(stamp: u64, bones: &[Entity], attachments: &Attachments) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    stamp.hash(&mut h);
    bones.hash(&mut h);
    attachments.nodes().hash(&mut h);
    attachments.settings().unpushed_rings.hash(&mut h);
    h.finish()
}

/// S1: drives attached cloths from their bones' poses (pin targets, teleports, inertia), cloths
/// in parallel (each reads its bones and writes only itself: the result does not depend on the
/// threads).
pub fn drive_attachments(
    mut cloths: Query<(Entity, &mut ClothSim, &mut ClothAttachments)>,
    bones: Query<&BonePose>,
    lod: Option<Res<ClothLod>>,
) {
    thread_local! {
        static POSES: std::cell::RefCell<Vec<Pose>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let lod = lod.as_deref();
    let mut all: Vec<_> = cloths.iter_mut().collect();
    all.par_iter_mut().for_each(|(entity, sim, att)| {
        // A cloth the plan has following its skin this tick is moved by its skin; it needs no
        // inertia carry (see `Attachments::apply_carrying`), and of its skin only the motion.
        let carry = lod.is_none_or(|l| l.simulates(*entity));
        let skin = skin_use(lod, *entity);
        POSES.with_borrow_mut(|poses| drive_one(sim, att, &bones, poses, (carry, skin)));
    });
}

/// What of its skin a cloth entity needs this tick ([`SkinUse`]): with a [`ClothLod`], by its
/// rung (simulated: what its limits read; following the skin: the skin's motion; asleep:
/// nothing); without one, what its limits read. The Bevy plugin drives its pins by the same
/// rule.
pub fn skin_use(lod: Option<&ClothLod>, entity: Entity) -> SkinUse {
    let rung = lod.and_then(|l| Some(&l.budget().ladder[l.rung_of(entity)?]));
    match rung {
        None | Some(Rung::Simulate { .. } | Rung::HalfRate { .. }) => SkinUse::Limits,
        Some(Rung::FollowSkin) if crate::lod::FOLLOW_BLEND > 0.0 => SkinUse::Every,
        Some(Rung::FollowSkin) => SkinUse::Motion,
        Some(Rung::Sleep) => SkinUse::Nothing,
    }
}

/// [`drive_attachments`] for one cloth, its bones' poses gathered into `poses`.
fn drive_one(
    sim: &mut ClothSim,
    att: &mut ClothAttachments,
    bones: &Query<&BonePose>,
    poses: &mut Vec<Pose>,
    (carry, skin): (bool, SkinUse),
) {
    poses.clear();
    let mut missing = None;
    for &b in &att.bones {
        match bones.get(b) {
            Ok(p) => poses.push(p.0),
            Err(_) => {
                missing = Some(b);
                break;
            }
        }
    }
    if let Some(b) = missing {
        att.last_error = Some(AttachError::BadSetting {
            name: "bones",
            reason: format!("bone entity {b:?} has no BonePose"),
        });
        return;
    }
    // A new or changed attachment set re-pins the cloth (a refactorisation).
    if sim.cloth.pins() != att.attachments.nodes()
        && let Err(e) = sim.cloth.set_pins(att.attachments.nodes())
    {
        att.last_error = Some(e.into());
        return;
    }
    att.last_error = att
        .attachments
        .apply_using(&mut sim.cloth, poses, carry, skin)
        .err();
}

/// Applies `config` to `cloth` where it differs (a different substep length refactors), with
/// `groups` (the entity's [`ClothCollisionGroups`]) in place of the config's contact groups.
/// With `budget` false the budget, timestep and gravity are left to the level of detail
/// ([`ClothLod`]).
fn configure(
    cloth: &mut Cloth,
    config: &ClothConfig,
    groups: Option<&ClothCollisionGroups>,
    budget: bool,
) -> Result<(), ClothError> {
    if budget {
        configure_budget(cloth, config)?;
    } else if cloth.settings().gravity != config.gravity {
        cloth.set_gravity(config.gravity)?;
    }
    let contact = ContactSettings {
        groups: groups.map_or(config.contact.groups, |g| g.0),
        ..config.contact
    };
    if cloth.contact_settings() != &contact {
        cloth.set_contact_settings(contact)?;
    }
    if cloth.aerodynamics() != &config.aero {
        cloth.set_aerodynamics(config.aero)?;
    }
    if cloth.limit_settings() != &config.limits {
        cloth.set_limit_settings(config.limits.clone())?;
    }
    if cloth.self_collision() != &config.self_collision {
        cloth.set_self_collision(config.self_collision)?;
    }
    Ok(())
}

/// The budget, timestep and gravity of `config` on `cloth`.
fn configure_budget(cloth: &mut Cloth, config: &ClothConfig) -> Result<(), ClothError> {
    let settings = config.budget.settings(config.timestep, config.gravity)?;
    let current = cloth.settings();
    if settings.substeps != current.substeps
        || settings.iterations != current.iterations
        || settings.method != current.method
        || settings.frame_time != current.frame_time
        || settings.gravity != current.gravity
        || settings.strain_cap != current.strain_cap
        || settings.weights != current.weights
    {
        let s = SolverSettings {
            integrator: current.integrator,
            catch_up_frames: current.catch_up_frames,
            ..settings
        };
        cloth.set_settings(s)?;
    }
    Ok(())
}

/// S2: steps every cloth one tick against the gathered colliders, cloths in parallel. With a
/// [`ClothLod`] resource, each cloth runs at the rung its plan gave it
/// ([`LodModels::tick`]), its time measured and recorded for the scheduler's estimates.
pub fn step_cloths(
    mut cloths: Query<(
        Entity,
        &mut ClothSim,
        Option<&ClothConfigOverride>,
        Option<&ClothCollisionGroups>,
    )>,
    config: Res<ClothConfig>,
    colliders: Res<ClothColliders>,
    lod: Option<ResMut<ClothLod>>,
    mut layering: Option<ResMut<ClothLayering>>,
    layered: Query<&ClothLayer>,
) {
    let config = &*config;
    let set = &colliders.set;
    let mut all: Vec<_> = cloths.iter_mut().collect();
    for item in all.iter_mut() {
        item.1.stepped = false;
    }
    // The layered cloths first, in layer order (order, then entity), then every other cloth.
    all.sort_by_key(|item| match layered.get(item.0) {
        Ok(layer) => (0, layer.order, item.0),
        Err(_) => (1, 0, item.0),
    });
    let layered_count = layering.as_deref_mut().map_or(0, |layering| {
        if order_layers(&all, layering, &layered) {
            layering.order.len()
        } else {
            0
        }
    });
    let count = all.len();
    let (grouped, rest) = all.split_at_mut(layered_count);
    let Some(mut lod) = lod else {
        let step_rest = |rest: &mut [StepItem<'_>]| {
            rest.par_iter_mut().for_each(|(_, sim, over, groups)| {
                let cfg = over.map_or(config, |o| &o.0);
                let sim = &mut **sim;
                let result = configure(&mut sim.cloth, cfg, *groups, true)
                    .and_then(|_| sim.cloth.step_with(cfg.timestep, set));
                finish_step(sim, result.map(Some));
            });
        };
        match layering.as_deref_mut() {
            Some(layering) if !grouped.is_empty() => {
                for (_, sim, over, groups) in grouped.iter_mut() {
                    let cfg = over.map_or(config, |o| &o.0);
                    if let Err(e) = configure(&mut sim.cloth, cfg, *groups, true) {
                        sim.last_error = Some(e);
                    }
                }
                rayon::join(
                    || step_layered(grouped, config.timestep, set, layering),
                    || step_rest(rest),
                );
            }
            _ => step_rest(rest),
        }
        return;
    };
    // The timings go into the resource's kept list (no allocation per tick).
    let mut timings = std::mem::take(&mut lod.timings);
    timings.clear();
    timings.reserve(count);
    let shared = &*lod;
    let wall = std::time::Instant::now();
    // The layered cloths step in their groups when every one of them is on a rung simulated
    // this whole tick (each put on its rung's model here); else they tick alone below.
    let mut layered_tick = false;
    if let Some(layering) = layering.as_deref_mut()
        && !grouped.is_empty()
    {
        let start = std::time::Instant::now();
        let mut all_in = true;
        for (entity, sim, over, groups) in grouped.iter_mut() {
            let cfg = over.map_or(config, |o| &o.0);
            let entered = shared.tracked.get(entity).is_some_and(|t| {
                let rung = shared.scheduler.rung(t.id).unwrap_or(0);
                configure(&mut sim.cloth, cfg, *groups, false).is_ok()
                    && shared.models[t.class as usize]
                        .enter_rung(&mut sim.cloth, rung, t.behind, cfg.timestep)
                        .unwrap_or(false)
            });
            all_in &= entered;
        }
        if all_in {
            step_layered(grouped, config.timestep, set, layering);
            // The groups' time, shared by node count.
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let nodes: usize = grouped.iter().map(|i| i.1.cloth.positions().len()).sum();
            for item in grouped.iter() {
                let share = item.1.cloth.positions().len() as f64 / nodes.max(1) as f64;
                timings.push((item.0, ms * share, true));
            }
            layered_tick = true;
        }
    }
    // Layered cloths not stepped in their groups tick alone.
    let alone: &mut [StepItem<'_>] = if layered_tick { &mut [] } else { grouped };
    // One cloth's tick at its rung, timed.
    let tick = |item: &mut StepItem<'_>| {
        let (entity, sim, over, groups) = item;
        let cfg = over.map_or(config, |o| &o.0);
        let sim = &mut **sim;
        let Some(t) = shared.tracked.get(entity) else {
            return (0.0, true);
        };
        let rung = shared.scheduler.rung(t.id).unwrap_or(0);
        let start = std::time::Instant::now();
        let result = configure(&mut sim.cloth, cfg, *groups, false).and_then(|_| {
            let turn = (shared.ticks + u64::from(t.turn.unwrap_or(0))).is_multiple_of(2);
            shared.models[t.class as usize].tick(
                &mut sim.cloth,
                rung,
                (t.behind, turn),
                cfg.timestep,
                set,
            )
        });
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let advanced = result.as_ref().map_or(true, |r| r.advanced);
        finish_step(sim, result.map(|r| r.report));
        (ms, advanced)
    };
    // The dearest cloths first, each thread taking the next cloth as it comes free (greedy
    // longest-first). Rayon's halving split of the entity order gave one thread a run of near,
    // simulated cloths while the other finished its far ones and waited: on `crowd` (two
    // threads) the slowest tenth of the ticks took 1.8 times the larger of half the summed
    // time and the dearest cloth; greedy, 1.2 (the sorted cloths dealt in turn to the split's
    // two halves: 1.35-1.5).
    let cost = |item: &StepItem<'_>| {
        shared.tracked.get(&item.0).map_or(0.0, |t| {
            let rung = shared.scheduler.rung(t.id).unwrap_or(0);
            shared.scheduler.estimate(t.id, rung).unwrap_or(0.0)
        })
    };
    rest.sort_unstable_by(|a, b| cost(b).total_cmp(&cost(a)).then(a.0.cmp(&b.0)));
    // The timings go into the kept list under a lock (64 pushes a tick, no contention to
    // speak of): collecting them from the bridge allocated on the workers every tick, and
    // memory freed on another thread than it was taken on grows glibc's arenas.
    let out = std::sync::Mutex::new(&mut timings);
    alone
        .iter_mut()
        .chain(rest.iter_mut())
        .par_bridge()
        .for_each(|item| {
            let (ms, advanced) = tick(item);
            if let Ok(mut out) = out.lock() {
                out.push((item.0, ms, advanced));
            }
        });
    let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
    lod.record_tick(&timings, wall_ms);
    lod.timings = timings;
}

/// Steps the layered cloths (`grouped`, in layer order, after [`order_layers`]) one tick in
/// their groups ([`ClothLayers::step_groups`]), each cloth's outcome kept on its
/// [`ClothSim`].
fn step_layered(
    grouped: &mut [StepItem<'_>],
    dt: f64,
    set: &ColliderSet,
    layering: &mut ClothLayering,
) {
    let Some(layers) = layering.layers.as_mut() else {
        return;
    };
    let mut reports = std::mem::take(&mut layering.reports);
    reports.clear();
    reports.resize(grouped.len(), StepReport::default());
    let result = layers
        .begin_frame(grouped.iter().map(|i| &i.1.cloth), dt, set)
        .map_err(ClothError::from)
        .and_then(|_| layers.step_groups(grouped, dt, set, &mut reports));
    for (item, report) in grouped.iter_mut().zip(&reports) {
        let outcome = match &result {
            Ok(()) => Ok(Some(*report)),
            Err(e) => Err(e.clone()),
        };
        finish_step(&mut item.1, outcome);
    }
    layering.reports = reports;
}

impl HoldsCloth for StepItem<'_> {
    fn cloth(&self) -> &Cloth {
        &self.1.cloth
    }
    fn cloth_mut(&mut self) -> &mut Cloth {
        &mut self.1.cloth
    }
}

/// One query item of [`step_cloths`].
type StepItem<'a> = (
    Entity,
    Mut<'a, ClothSim>,
    Option<&'a ClothConfigOverride>,
    Option<&'a ClothCollisionGroups>,
);

/// The layer order of this tick: the [`ClothLayer`] cloths among `all` sorted by order (then
/// entity), the layers rebuilt when they or their groups changed, and each stepped cloth's
/// place in the order. Returns false (step without layers) when fewer than two cloths are
/// layered or the layers cannot be built.
fn order_layers(
    all: &[StepItem<'_>],
    layering: &mut ClothLayering,
    layered: &Query<&ClothLayer>,
) -> bool {
    let mut entities = std::mem::take(&mut layering.entities);
    entities.clear();
    for (i, (entity, _, _, groups)) in all.iter().enumerate() {
        if let Ok(layer) = layered.get(*entity) {
            let g = groups.map_or(CollisionGroups::ALL, |g| g.0);
            entities.push((layer.order, *entity, g, i));
        }
    }
    entities.sort_unstable_by_key(|&(order, entity, ..)| (order, entity));
    let same = entities.len() == layering.built_for.len()
        && entities
            .iter()
            .zip(&layering.built_for)
            .all(|(a, b)| a.1 == b.0 && a.2 == b.1);
    if !same || layering.layers.is_none() {
        layering.built_for.clear();
        layering
            .built_for
            .extend(entities.iter().map(|&(_, e, g, _)| (e, g)));
        let groups: Vec<CollisionGroups> = layering.built_for.iter().map(|b| b.1).collect();
        match ClothLayers::by_groups(layering.settings, &groups) {
            Ok(l) => {
                layering.layers = Some(l);
                layering.error = None;
            }
            Err(e) => {
                layering.layers = None;
                layering.error = Some(e);
            }
        }
    }
    // Per stepped cloth, its place in the layer order (or none), and the reverse.
    layering.place.clear();
    layering.place.resize(all.len(), None);
    layering.order.clear();
    for (p, &(.., i)) in entities.iter().enumerate() {
        layering.place[i] = Some(p);
        layering.order.push(i);
    }
    layering.entities = entities;
    layering.layers.is_some() && layering.order.len() >= 2
}

/// Keeps a step's outcome on its [`ClothSim`] (a tick that did not simulate keeps the last
/// report).
fn finish_step(sim: &mut ClothSim, result: Result<Option<StepReport>, ClothError>) {
    match result {
        Ok(report) => {
            if let Some(r) = report {
                sim.last_step = r;
                sim.stepped = true;
            }
            sim.last_error = None;
        }
        Err(e) => sim.last_error = Some(e),
    }
}

/// Level of detail for every cloth (a [`Resource`]: insert one to turn it on): one frame budget
/// for all cloths, each given a rung of the budget's ladder every tick by its priority (see
/// [`crate::lod`] for the rules and their defaults). [`plan_cloth_lod`] (in
/// [`ClothSystems::S1GatherPoses`]) tracks the cloth entities and plans;
/// [`step_cloths`] runs each at its rung and feeds the measured times back. A cloth's priority
/// is minus its centre of mass's distance from [`ClothLod::viewer`] (the camera; the game
/// sets it each tick, the Bevy plugin from its viewer entity), or its [`LodPriority`].
/// Cloths of one model share their rungs' factors and their cost estimates. The config's
/// budget is not used while this resource is present (the rungs set it).
#[derive(Resource, Debug)]
pub struct ClothLod {
    /// The scheduler (its budget, rungs and estimates).
    pub scheduler: LodScheduler,
    /// Where priorities are measured from (world, metres).
    pub viewer: DVec3,
    /// Per class (cloth model): the ladder's models.
    models: Vec<LodModels>,
    tracked: HashMap<Entity, Tracked>,
    /// Entities seen by the last plan (sorted).
    seen: Vec<Entity>,
    /// Scratch of a plan: the cloths arriving on a half-rate rung, in id order.
    half_rate: Vec<(LodId, Entity)>,
    /// Scratch of a tick: each cloth's measured time and whether its state advanced.
    timings: Vec<(Entity, f64, bool)>,
    ticks: u64,
    last_total_ms: f64,
    last_wall_ms: f64,
    /// When this tick's cloth schedule began ([`begin_cloth_tick`]); `None` without it.
    tick_start: Option<std::time::Instant>,
    last_tick_ms: f64,
    trim: FrameTrim,
}

/// A cloth entity in [`ClothLod`].
#[derive(Debug, Clone, Copy)]
struct Tracked {
    id: LodId,
    class: u32,
    /// Ticks its state is behind (see [`LodModels::tick`]).
    behind: u32,
    /// Its half-rate phase while the plan keeps it on a half-rate rung (`None` off it): half
    /// of the half-rate cloths step on even ticks, half on odd.
    turn: Option<u32>,
}

/// Overrides a cloth entity's level-of-detail priority (higher is more important; the default
/// is minus its distance from [`ClothLod::viewer`]).
#[derive(Component, Debug, Clone, Copy, PartialEq)]
pub struct LodPriority(pub f64);

impl ClothLod {
    /// Level of detail within `budget` (validated), the viewer at the origin.
    pub fn new(budget: ClothBudget) -> Result<Self, ClothError> {
        Ok(Self {
            scheduler: LodScheduler::new(budget)?,
            viewer: DVec3::ZERO,
            models: Vec::new(),
            tracked: HashMap::new(),
            seen: Vec::new(),
            half_rate: Vec::new(),
            timings: Vec::new(),
            ticks: 0,
            last_total_ms: 0.0,
            last_wall_ms: 0.0,
            tick_start: None,
            last_tick_ms: 0.0,
            trim: FrameTrim::default(),
        })
    }

    /// The budget the plan fills.
    pub fn budget(&self) -> &ClothBudget {
        self.scheduler.budget()
    }

    /// Replaces the budget (a game's settings menu, a platform's figure measured at start),
    /// keeping every cloth's rung and cost estimates; the next plan fills the new one. The
    /// ladder must stay the one the cloths' models were built for
    /// ([`ClothError::InvalidSetting`] otherwise: a ladder of other rungs needs a new
    /// `ClothLod`), and the budget must validate ([`ClothBudget::validate`]).
    pub fn set_budget(&mut self, budget: ClothBudget) -> Result<(), ClothError> {
        if budget.ladder != self.scheduler.budget().ladder {
            return Err(ClothError::InvalidSetting {
                name: "ladder",
                reason: "ClothLod::set_budget keeps the ladder its cloths' models were built for; \
                         make a new ClothLod for another ladder"
                    .into(),
            });
        }
        self.scheduler.set_budget(budget)
    }

    /// The rung (index into the budget's ladder) a cloth entity runs at this tick.
    pub fn rung_of(&self, entity: Entity) -> Option<usize> {
        self.tracked
            .get(&entity)
            .and_then(|t| self.scheduler.rung(t.id))
    }

    /// Whether the rung the plan gives a cloth entity this tick steps it (true for an entity
    /// not tracked yet: it has not been planned).
    pub fn simulates(&self, entity: Entity) -> bool {
        self.rung_of(entity)
            .is_none_or(|r| self.scheduler.budget().ladder[r].simulates())
    }

    /// The summed step time of every cloth in the last tick (ms), as measured.
    pub fn last_total_ms(&self) -> f64 {
        self.last_total_ms
    }

    /// The wall-clock time of the last tick's cloth stepping (ms; cloths in parallel), the
    /// step alone.
    pub fn last_wall_ms(&self) -> f64 {
        self.last_wall_ms
    }

    /// The wall-clock time of the last tick's whole cloth schedule (ms): from
    /// [`begin_cloth_tick`] to [`end_cloth_tick`] (colliders, attachments, the plan, the step,
    /// render meshes), what the game loses to cloth each tick, and the figure
    /// [`ClothBudget::frame_ms`] bounds (its 99th percentile kept there by [`FrameTrim`]).
    /// Without those two systems in the schedule, the step's own time
    /// ([`ClothLod::last_wall_ms`]) is what the budget bounds and this stays 0.
    pub fn last_tick_ms(&self) -> f64 {
        self.last_tick_ms
    }

    /// Cloth models seen (each with its ladder's factors).
    pub fn classes(&self) -> usize {
        self.models.len()
    }

    /// Tracks `entity`'s cloth (a new one joins its model's class, or starts one with the
    /// ladder's models built from it), sets its priority.
    fn track(
        &mut self,
        entity: Entity,
        cloth: &Cloth,
        priority: f64,
        timestep: f64,
    ) -> Result<(), ClothError> {
        let id = match self.tracked.get(&entity) {
            Some(t) => t.id,
            None => {
                let model = cloth.model();
                let class = match self.models.iter().position(|m| m.holds(model)) {
                    Some(c) => c,
                    None => {
                        let ladder = self.scheduler.budget().ladder.clone();
                        self.models.push(LodModels::new(model, &ladder, timestep)?);
                        self.models.len() - 1
                    }
                } as u32;
                let nodes = cloth.positions().len() as u32;
                let id = self.scheduler.insert(class, nodes);
                self.tracked.insert(
                    entity,
                    Tracked {
                        id,
                        class,
                        behind: 1,
                        turn: None,
                    },
                );
                id
            }
        };
        self.seen.push(entity);
        self.scheduler.set_priority(id, priority);
        Ok(())
    }

    /// Ends the tracking of a plan: cloths not seen leave the scheduler; then plans.
    fn plan(&mut self, timestep: f64) {
        self.seen.sort_unstable();
        let (seen, scheduler) = (&self.seen, &mut self.scheduler);
        self.tracked.retain(|e, t| {
            let keep = seen.binary_search(e).is_ok();
            if !keep {
                scheduler.remove(t.id);
            }
            keep
        });
        let scale = if self.scheduler.budget().trim {
            self.trim.scale()
        } else {
            1.0
        };
        self.scheduler
            .plan_scaled(self.ticks as f64 * timestep, scale);
        self.seen.clear();
        // Half of the half-rate cloths step on each tick. A cloth keeps its phase while it
        // stays on the rung; one arriving takes the phase with fewer cloths (in id order).
        // (Phases given anew by id order at every plan moved cloths that had just waited a
        // tick to the other phase: on `crowd` they then stepped three or four ticks at once,
        // single cloths taking 2-5 ms of a 4 ms frame.)
        self.half_rate.clear();
        let ladder = &self.scheduler.budget().ladder;
        let mut phases = [0usize; 2];
        for (&e, t) in &mut self.tracked {
            let rung = self.scheduler.rung(t.id).unwrap_or(0);
            if !matches!(ladder[rung], Rung::HalfRate { .. }) {
                t.turn = None;
            } else if let Some(turn) = t.turn {
                phases[turn as usize % 2] += 1;
            } else {
                self.half_rate.push((t.id, e));
            }
        }
        self.half_rate.sort_unstable();
        for (_, e) in &self.half_rate {
            if let Some(t) = self.tracked.get_mut(e) {
                let turn = usize::from(phases[1] < phases[0]);
                phases[turn] += 1;
                t.turn = Some(turn as u32);
            }
        }
    }

    /// Takes in a tick's measured times (entity, ms, whether its state advanced) and the
    /// stepping's wall-clock time.
    fn record_tick(&mut self, timings: &[(Entity, f64, bool)], wall_ms: f64) {
        self.last_wall_ms = wall_ms;
        if self.tick_start.is_none() {
            let planned = self.scheduler.planned_ms();
            self.trim.record(wall_ms, planned, self.scheduler.budget());
        }
        let mut total = 0.0;
        for &(entity, ms, advanced) in timings {
            if let Some(t) = self.tracked.get_mut(&entity) {
                if let Some(rung) = self.scheduler.rung(t.id) {
                    // A half-rate cloth costs nothing on the tick it holds and steps the ticks
                    // since it last moved on the other (two, once on the rung; one on its
                    // first turn): its cost per tick is that step over those ticks, recorded
                    // when it steps. Recording both ticks' times, a class's first measurement
                    // could be a held tick's zero or a one-tick step, and the plan then put
                    // too many cloths on the rung and had to take them off within their dwell
                    // (`crowd`: twelve capes changed rung twice within 0.15 s of the start).
                    match self.scheduler.budget().ladder[rung] {
                        Rung::HalfRate { .. } if advanced => {
                            let ticks = f64::from(t.behind.max(1));
                            self.scheduler.record(t.id, rung, ms / ticks)
                        }
                        Rung::HalfRate { .. } => {}
                        _ => self.scheduler.record(t.id, rung, ms),
                    }
                }
                t.behind = if advanced { 1 } else { t.behind + 1 };
            }
            total += ms;
        }
        self.last_total_ms = total;
        self.ticks += 1;
    }
}

/// S1 (with a [`ClothLod`] resource): tracks every cloth entity (new ones join, despawned ones
/// leave), sets priorities ([`LodPriority`], else minus the distance from the viewer) and plans
/// this tick's rungs. A cloth whose ladder cannot be built gets the error on its
/// [`ClothSim::last_error`].
pub fn plan_cloth_lod(
    mut cloths: Query<(Entity, &mut ClothSim, Option<&LodPriority>)>,
    config: Res<ClothConfig>,
    lod: Option<ResMut<ClothLod>>,
) {
    let Some(mut lod) = lod else {
        return;
    };
    let viewer = lod.viewer;
    for (entity, mut sim, priority) in &mut cloths {
        let p = priority.map_or_else(|| -sim.cloth.center_of_mass().distance(viewer), |p| p.0);
        if let Err(e) = lod.track(entity, &sim.cloth, p, config.timestep) {
            sim.last_error = Some(e);
        }
    }
    lod.plan(config.timestep);
}

/// S3: writes render positions, normals ([`Cloth::write_render_mesh`]) and (once) indices of
/// every drawn cloth ([`ClothDrawn`]), cloths in parallel.
pub fn write_render_meshes(
    mut cloths: Query<(&ClothSim, &mut ClothRenderMesh, Option<&ClothDrawn>)>,
) {
    let mut all: Vec<_> = cloths
        .iter_mut()
        .filter(|(_, _, drawn)| drawn.is_none_or(|d| d.0))
        .collect();
    all.par_iter_mut().for_each(|(sim, mesh, _)| {
        let mesh = &mut **mesh;
        sim.cloth
            .write_render_mesh(&mut mesh.positions, &mut mesh.normals);
        if mesh.indices.is_empty() {
            mesh.indices = sim.cloth.render_indices();
        }
    });
}
