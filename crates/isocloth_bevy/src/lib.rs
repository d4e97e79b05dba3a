//! Bevy plugin for [`isocloth`]: cloth on `Mesh3d` entities, pinned to bone entities and
//! pushed by collider entities, read from their `GlobalTransform`s.
//!
//! Built on the Bevy 0.20 sub-crates (`bevy_app`, `bevy_ecs`, `bevy_transform`, `bevy_asset`,
//! `bevy_mesh`, `bevy_time`), so it needs neither the renderer nor the full `bevy` crate.
//! [`IsoclothPlugin`] adds isocloth's three numbered system sets ([`ClothSystems`]) to
//! `FixedUpdate`:
//!
//! 0. Before the sets, [`play_characters`] poses the joint entities of glTF characters
//!    ([`spawn_character`], [`character`]) at their clips' time;
//! 1. [`ClothSystems::S1GatherPoses`]: the tick's clock starts ([`begin_cloth_tick`]); cloths
//!    whose mesh asset has loaded are built ([`build_cloths`]); [`ClothCollider`] entities pose
//!    the shared collider set and leave it when despawned ([`gather_colliders`]); with a
//!    [`ClothLod`], the level of detail plans the tick; pinned vertices follow their bones
//!    ([`drive_pins`], cloths in parallel, each skinned only as far as its rung needs);
//! 2. [`ClothSystems::S2Step`]: every cloth steps one fixed tick, cloths in parallel;
//! 3. [`ClothSystems::S3WriteMeshes`]: positions and normals go into each cloth's `Mesh` asset
//!    ([`write_meshes`], computed in parallel; not for a cloth whose
//!    `isocloth::ecs::ClothDrawn` is false), then the tick's clock stops: with a
//!    [`ClothLod`], its budget bounds the whole tick ([`end_cloth_tick`]).
//!
//! The cloth simulates in world space. Poses are read from `GlobalTransform`, which Bevy
//! propagates in `PostUpdate`: a tick sees the bones where the last frame left them, as any
//! fixed-step physics in Bevy does.
//!
//! ```
//! use bevy_app::prelude::*;
//! use bevy_asset::prelude::*;
//! use bevy_ecs::prelude::*;
//! use bevy_mesh::{Indices, Mesh, Mesh3d, PrimitiveTopology};
//! use bevy_asset::RenderAssetUsages;
//! use bevy_transform::prelude::*;
//! use isocloth::{ColliderShape, Material};
//! use isocloth_bevy::{ClothCollider, ClothPin, HeadlessPlugins, IsoclothPlugin, SimulatedCloth};
//!
//! fn setup(mut commands: Commands, mut meshes: ResMut<Assets<Mesh>>) {
//!     // A 1 m banner, 2 x 2 quads, in the XY plane; its top row hangs from a pole entity.
//!     let pole = commands.spawn(Transform::from_xyz(0.0, 2.0, 0.0)).id();
//!     let positions: Vec<[f32; 3]> = (0..9)
//!         .map(|k| [(k % 3) as f32 * 0.5, 2.0 - (k / 3) as f32 * 0.5, 0.0])
//!         .collect();
//!     let indices = vec![0, 3, 1, 1, 3, 4, 1, 4, 2, 2, 4, 5, 3, 6, 4, 4, 6, 7, 4, 7, 5, 5, 7, 8];
//!     let mesh = Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
//!         .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
//!         .with_inserted_indices(Indices::U32(indices));
//!     commands.spawn((
//!         Mesh3d(meshes.add(mesh)),
//!         Transform::default(),
//!         SimulatedCloth {
//!             material: Material::default(),
//!             pins: (0..3).map(|vertex| ClothPin::new(vertex, pole)).collect(),
//!         },
//!     ));
//!     // A ball that pushes the banner.
//!     commands.spawn((
//!         Transform::from_xyz(0.5, 1.4, 0.1),
//!         ClothCollider::new(ColliderShape::Sphere { radius: 0.2 }),
//!     ));
//! }
//!
//! let mut app = App::new();
//! // A game adds DefaultPlugins instead of HeadlessPlugins.
//! app.add_plugins((HeadlessPlugins, IsoclothPlugin::default()))
//!     .add_systems(Startup, setup);
//! app.update(); // in a game, `App::run` with the DefaultPlugins
//! ```

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod character;

use std::collections::HashMap;
use std::sync::Arc;

use bevy_app::{App, FixedUpdate, Plugin, PluginGroup, PluginGroupBuilder};
use bevy_asset::{AssetId, Assets, RenderAssetUsages};
use bevy_ecs::prelude::*;
use bevy_mesh::skinning::{SkinnedMesh, SkinnedMeshInverseBindposes};
use bevy_mesh::{Indices, Mesh, Mesh3d, PrimitiveTopology, VertexAttributeValues, VertexFormat};
use bevy_time::{Fixed, Time};
use bevy_transform::components::{GlobalTransform, Transform};
use glam::{DVec3, Mat4, Vec3};
use isocloth::attachment::{AttachError, AttachmentSettings, Attachments, Influence};
use isocloth::ecs::{
    ClothColliders, ClothConfig, ClothDrawn, ClothLod, begin_cloth_tick, count_cloth_work,
    end_cloth_tick, init_cloth_resources, plan_cloth_lod, skin_use, step_cloths,
    update_pin_exclusions,
};
use isocloth::{
    BaseMesh, Cloth, ClothError, ClothMesh, ClothModel, ColliderError, ColliderShape,
    CollisionGroups, ConvexHull, LimitSettings, Material, MeshError, Pose, TriangleMesh,
};
use rayon::prelude::*;
use thiserror::Error;

pub use isocloth::ecs::{
    ClothCollisionGroups, ClothConfigOverride, ClothLayer, ClothLayering, ClothSim, ClothSystems,
};

/// Adds isocloth to a Bevy app: the [`ClothConfig`], [`ClothColliders`] and
/// `ClothTickCounters` resources (where missing), the systems in their numbered sets on `FixedUpdate`, and the fixed timestep.
#[derive(Debug, Clone)]
pub struct IsoclothPlugin {
    /// Sets `Time<Fixed>` to [`ClothConfig::timestep`] (1/60 s unless the app inserted a config
    /// first), so that each `FixedUpdate` tick is one cloth step. Default true; turn it off only
    /// if the app's fixed timestep already equals the config's.
    pub set_fixed_timestep: bool,
}

impl Default for IsoclothPlugin {
    fn default() -> Self {
        Self {
            set_fixed_timestep: true,
        }
    }
}

impl Plugin for IsoclothPlugin {
    fn build(&self, app: &mut App) {
        init_cloth_resources(app.world_mut());
        app.init_resource::<ClothModels>();
        if self.set_fixed_timestep {
            let dt = app.world().resource::<ClothConfig>().timestep;
            app.insert_resource(Time::<Fixed>::from_seconds(dt));
        }
        app.configure_sets(
            FixedUpdate,
            (
                ClothSystems::S1GatherPoses,
                ClothSystems::S2Step,
                ClothSystems::S3WriteMeshes,
            )
                .chain(),
        );
        app.add_systems(
            FixedUpdate,
            (
                begin_cloth_tick,
                build_cloths,
                gather_colliders,
                viewer_from_camera,
                plan_cloth_lod,
                drive_pins,
                exclude_pin_bodies,
            )
                .chain()
                .in_set(ClothSystems::S1GatherPoses),
        );
        app.add_systems(
            FixedUpdate,
            play_characters.before(ClothSystems::S1GatherPoses),
        );
        app.add_systems(
            FixedUpdate,
            (step_cloths, count_cloth_work)
                .chain()
                .in_set(ClothSystems::S2Step),
        );
        app.add_systems(
            FixedUpdate,
            (write_meshes, end_cloth_tick)
                .chain()
                .in_set(ClothSystems::S3WriteMeshes),
        );
    }
}

/// What a headless app (a server, a test, a tool) needs under [`IsoclothPlugin`] from the
/// sub-crates: task pools and time (the sub-crates' share of Bevy's `MinimalPlugins`),
/// transforms, assets and meshes. A game with `DefaultPlugins` already has these.
pub struct HeadlessPlugins;

impl PluginGroup for HeadlessPlugins {
    fn build(self) -> PluginGroupBuilder {
        PluginGroupBuilder::start::<Self>()
            .add(bevy_app::TaskPoolPlugin::default())
            .add(bevy_time::TimePlugin)
            .add(bevy_transform::TransformPlugin)
            .add(bevy_asset::AssetPlugin::default())
            .add(bevy_mesh::MeshPlugin)
    }
}

/// A vertex of the cloth's source mesh held by a bone entity: it follows the bone's
/// `GlobalTransform` rigidly from where it was when the cloth was built. Several pins on one
/// vertex blend their bones by weight (linear blend skinning; the weights are normalised).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClothPin {
    /// Index of the vertex in the source mesh's position attribute.
    pub vertex: u32,
    /// The bone entity (any entity with a `GlobalTransform`).
    pub bone: Entity,
    /// The bone's share of the vertex (> 0; 1 for a vertex on one bone).
    pub weight: f32,
}

impl ClothPin {
    /// `vertex` held by `bone` alone.
    pub fn new(vertex: u32, bone: Entity) -> Self {
        Self {
            vertex,
            bone,
            weight: 1.0,
        }
    }
}

/// Makes the `Mesh3d` of this entity a simulated cloth.
///
/// On the first tick where the mesh asset is loaded, [`build_cloths`] builds the cloth from it
/// (positions taken to world space by the entity's `GlobalTransform`, triangles from its
/// indices), binds the pins to their bones, and gives the entity a mesh asset of its own (a new
/// `Mesh3d` handle) holding the cloth's render mesh: four triangles per source triangle, with
/// positions, normals and, if the source had them, UVs (a new vertex at an edge's midpoint takes
/// the mean of its ends'). The source asset is left as it is: every entity made from it with the
/// same scale, pinned vertices, material and budget shares one model and its factorisation
/// ([`ClothModels`]). From then on [`write_meshes`] updates positions and normals each tick, in
/// the entity's local frame. The budget, contact and the rest come from the [`ClothConfig`] resource, or from a
/// [`ClothConfigOverride`] on the entity.
///
/// The source mesh must be a `TriangleList` with indices, kept in the main world
/// (`RenderAssetUsages::MAIN_WORLD`, part of the default). Vertices at exactly the same
/// position are one cloth vertex (as the OBJ loader merges them), so a mesh split at UV seams or
/// hard edges, as exporters write it, is one cloth; with UVs, the render mesh keeps one vertex
/// per node and UV, so each side of a seam keeps its texture coordinates (then
/// [`ClothBones::render_nodes`] maps render vertices to nodes). Pins name source vertices.
#[derive(Component, Debug, Clone, Default)]
pub struct SimulatedCloth {
    /// Density, bending stiffness, damping.
    pub material: Material,
    /// Held vertices.
    pub pins: Vec<ClothPin>,
}

/// Pins a [`SimulatedCloth`] from its mesh's own skin, the shape Bevy's glTF loader spawns a
/// skinned mesh in: the entity's `SkinnedMesh` (joint entities and inverse bind poses) and the
/// mesh's `JOINT_INDEX` and `JOINT_WEIGHT` (and `COLOR` for painted pins). A vertex the rule
/// pins rides its joints with its weights (normalised), as the skin would carry it; the others
/// are free. The cloth is built at the skinned pose of the tick it is built (the joints'
/// `GlobalTransform`s through the inverse bind poses); then the entity's `SkinnedMesh` is
/// removed, since the mesh now draws the simulated positions in the entity's frame. Pins
/// listed in [`SimulatedCloth::pins`] are added to these.
#[derive(Component, Debug, Clone, Copy, PartialEq)]
pub enum PinsFromSkin {
    /// A vertex whose stored joint weights sum to at least `threshold` (in (0, 1]) is pinned:
    /// weight-paint the collar onto the body's bones and leave the rest of the cape
    /// unweighted.
    Weights {
        /// The least total weight that pins (0.5 is a good start).
        threshold: f32,
    },
    /// A vertex whose `COLOR` channel `channel` (0 red, 1 green, 2 blue, 3 alpha) is at least
    /// 0.5 is pinned: paint 1 where the cloth is held, 0 where it is free, as Unity's and
    /// Magica's artists paint pins. Every painted vertex must be weighted to some joint.
    Painted {
        /// The colour channel, 0 to 3.
        channel: u8,
    },
}

impl Default for PinsFromSkin {
    fn default() -> Self {
        Self::Weights { threshold: 0.5 }
    }
}

/// A cloth mesh's painted max distance (metres per vertex, `Float32`): each vertex stays
/// within it of where the skin carries it (see [`isocloth::LimitSettings::max_distance`]). Needs
/// the cloth pinned from its skin ([`PinsFromSkin`] and a `SkinnedMesh`), every vertex
/// weighted to some joint. From a glTF file register it with Bevy's glTF loader as the custom
/// attribute `_MAX_DISTANCE` (`GltfPlugin::add_custom_vertex_attribute`); the cloth then gets
/// its own [`ClothConfigOverride`] (the global config with these limits).
pub const ATTRIBUTE_MAX_DISTANCE: bevy_mesh::MeshVertexAttribute =
    bevy_mesh::MeshVertexAttribute::new("Vertex_MaxDistance", 0x150c_107d, VertexFormat::Float32);

/// How a [`SimulatedCloth`]'s pins ride their bones (read when the cloth is built; default
/// [`AttachmentSettings::default`]): inertia scales, teleport distance, the pin rule's rings,
/// and `rigid_pins` (the pinned row moves as one rigid piece: a collar on the neck and both
/// shoulders turns without stretching).
#[derive(Component, Debug, Clone, Copy, PartialEq, Default)]
pub struct ClothPinSettings(pub AttachmentSettings);

/// What went wrong building or driving a cloth.
#[derive(Debug, Error)]
pub enum BevyClothError {
    /// The mesh is not a triangle list.
    #[error("the cloth's mesh is {0:?}, not a TriangleList")]
    NotTriangleList(PrimitiveTopology),
    /// The mesh has no `Float32x3` positions.
    #[error("the cloth's mesh has no Float32x3 POSITION attribute")]
    NoPositions,
    /// The mesh has no indices.
    #[error("the cloth's mesh has no indices")]
    NoIndices,
    /// The mesh's data lives in the render world only.
    #[error("the cloth's mesh is not kept in the main world (RenderAssetUsages::MAIN_WORLD)")]
    NotInMainWorld,
    /// A pin names a vertex the mesh does not have.
    #[error("pin vertex {vertex} does not exist (the mesh has {count} vertices)")]
    NoSuchVertex {
        /// The vertex.
        vertex: u32,
        /// Vertex count.
        count: usize,
    },
    /// A pin's weight is not finite and positive.
    #[error("pin of vertex {vertex} has weight {weight} (must be finite and positive)")]
    BadWeight {
        /// The vertex.
        vertex: u32,
        /// The weight.
        weight: f32,
    },
    /// A bone entity has no `GlobalTransform` (or a non-finite one) when the cloth is built.
    #[error("bone entity {0:?} has no usable GlobalTransform")]
    BadBone(Entity),
    /// The mesh is not a valid cloth.
    #[error(transparent)]
    Mesh(#[from] MeshError),
    /// The cloth refused its settings.
    #[error(transparent)]
    Cloth(#[from] ClothError),
    /// The pins could not be bound.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// [`PinsFromSkin`] on a cloth whose entity or mesh lacks the skin.
    #[error("pins from the skin: {0}")]
    NotSkinned(&'static str),
    /// A painted or skin attribute of the wrong type, size or range.
    #[error("pins from the skin: attribute {attribute}: {reason}")]
    BadAttribute {
        /// The attribute (`Vertex_Color`, `Vertex_JointIndex`, `Vertex_JointWeight`).
        attribute: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The rule pinned no vertex.
    #[error("pins from the skin: the rule {0:?} pins no vertex")]
    NoPins(PinsFromSkin),
    /// The rule pinned every vertex: nothing would move (a mesh weighted as a whole, as
    /// exporters normalise it, under [`PinsFromSkin::Weights`]).
    #[error(
        "pins from the skin: the rule {0:?} pins every vertex (a fully weighted mesh: paint the pins and use PinsFromSkin::Painted, or leave the free part unweighted)"
    )]
    AllPinned(PinsFromSkin),
}

/// Set on a [`SimulatedCloth`] entity whose cloth could not be built (logged once as a warning).
/// Remove it, with the cause fixed, to try again.
#[derive(Component, Debug)]
pub struct ClothBuildError(pub BevyClothError);

/// A built cloth's link to its bones (inserted by [`build_cloths`]).
#[derive(Component, Debug)]
pub struct ClothBones {
    /// Bone entities, in the attachments' bone order.
    pub bones: Vec<Entity>,
    /// The bound pins.
    pub attachments: Attachments,
    /// Each bone's last good world pose: a despawned bone, or one with a non-finite transform,
    /// holds the pins there.
    pub last_poses: Vec<Pose>,
    /// Bones that are gone or bad at the last tick (each logged once as a warning when it goes).
    pub lost: Vec<Entity>,
    /// The last error applying the pins, if any.
    pub last_error: Option<AttachError>,
    /// Per vertex of the render mesh in the asset, the cloth node it shows (empty: vertex `i`
    /// is node `i`, as on a mesh without UV seams). On a mesh with UV seams vertex `i` is still
    /// node `i` for every node, and each further UV a seam gives a node adds a vertex after
    /// them, so that both sides of the seam keep their texture coordinates.
    pub render_nodes: Vec<u32>,
    /// [`write_meshes`]' scratch: the render positions and normals in the entity's frame.
    render_scratch: (Vec<Vec3>, Vec<Vec3>),
}

/// A collision shape on an entity with a `GlobalTransform` (a bone), in the frame
/// `GlobalTransform * offset` (scale ignored). Every cloth whose groups meet the entity's
/// [`ClothCollisionGroups`] (all, without one) collides with it, except the nodes pinned to this
/// entity and the ring next to them ([`exclude_pin_bodies`]); it leaves the collider set when
/// the entity is despawned or the component removed.
#[derive(Component, Debug, Clone, PartialEq)]
pub struct ClothCollider {
    /// The shape.
    pub shape: ColliderShape,
    /// Offset from the entity's frame.
    pub offset: Pose,
}

impl ClothCollider {
    /// `shape` at the entity's own frame.
    pub fn new(shape: ColliderShape) -> Self {
        Self {
            shape,
            offset: Pose::IDENTITY,
        }
    }

    /// A triangle-mesh collider from a `Mesh` asset (a table, a statue, a ship's rail), in the
    /// mesh's own coordinates (the entity's scale is not applied: scale the mesh). Vertices at
    /// exactly one position are welded first, as for cloth, so a mesh split at UV seams or hard
    /// edges is one surface: closed, it is solid and must be wound counter-clockwise seen from
    /// outside; open, it is a two-sided sheet ([`isocloth::TriangleMesh`]). Refused: a mesh that
    /// is not a triangle list, has no `Float32x3` positions or no indices, lives in the render
    /// world only, or whose data [`TriangleMesh::new`] refuses (the error names the triangle or
    /// vertex, counted after welding).
    pub fn trimesh(mesh: &Mesh) -> Result<Self, MeshColliderError> {
        let (vertices, triangles) = welded_triangles(mesh, true)?;
        let shape = TriangleMesh::new(vertices, triangles)?;
        Ok(Self::new(ColliderShape::TriMesh(Arc::new(shape))))
    }

    /// A convex-hull collider around a `Mesh` asset's vertices (a rock, a crate, a low-poly
    /// proxy), in the mesh's own coordinates; any topology, indices not needed. Refused: no
    /// `Float32x3` positions, data in the render world only, and points that span no volume
    /// ([`ConvexHull::new`]).
    pub fn convex_hull(mesh: &Mesh) -> Result<Self, MeshColliderError> {
        let (vertices, _) = welded_triangles(mesh, false)?;
        let shape = ConvexHull::new(vertices)?;
        Ok(Self::new(ColliderShape::ConvexHull(Arc::new(shape))))
    }
}

/// Why a `Mesh` asset could not become a [`ClothCollider`].
#[derive(Debug, Error)]
pub enum MeshColliderError {
    /// The mesh is not a triangle list (a triangle-mesh collider needs triangles).
    #[error("the collider's mesh is {0:?}, not a TriangleList")]
    NotTriangleList(PrimitiveTopology),
    /// The mesh has no `Float32x3` positions.
    #[error("the collider's mesh has no Float32x3 POSITION attribute")]
    NoPositions,
    /// The mesh has no indices (a triangle-mesh collider needs them).
    #[error("the collider's mesh has no indices")]
    NoIndices,
    /// The mesh's data lives in the render world only.
    #[error("the collider's mesh is not kept in the main world (RenderAssetUsages::MAIN_WORLD)")]
    NotInMainWorld,
    /// The shape refused the mesh's data.
    #[error(transparent)]
    Shape(#[from] ColliderError),
}

/// A mesh's welded vertices (`f64`) and, with `with_triangles`, its triangles over them.
fn welded_triangles(
    mesh: &Mesh,
    with_triangles: bool,
) -> Result<(Vec<DVec3>, Vec<[u32; 3]>), MeshColliderError> {
    let positions = match mesh.try_attribute_option(Mesh::ATTRIBUTE_POSITION) {
        Ok(Some(VertexAttributeValues::Float32x3(p))) => p,
        Ok(_) => return Err(MeshColliderError::NoPositions),
        Err(_) => return Err(MeshColliderError::NotInMainWorld),
    };
    let (weld, welded) = weld(positions);
    let vertices = welded
        .iter()
        .map(|&v| Vec3::from(positions[v as usize]).as_dvec3())
        .collect();
    if !with_triangles {
        return Ok((vertices, Vec::new()));
    }
    let topology = mesh.primitive_topology();
    if topology != PrimitiveTopology::TriangleList {
        return Err(MeshColliderError::NotTriangleList(topology));
    }
    let triangles = match mesh.try_indices_option() {
        Ok(Some(i)) => i
            .iter()
            .collect::<Vec<usize>>()
            .chunks_exact(3)
            // An index past the vertices stays past the welded ones, for the shape to name.
            .map(|t| [t[0], t[1], t[2]].map(|k| weld.get(k).copied().unwrap_or(k as u32)))
            .collect(),
        Ok(None) => return Err(MeshColliderError::NoIndices),
        Err(_) => return Err(MeshColliderError::NotInMainWorld),
    };
    Ok((vertices, triangles))
}

/// Marks the entity (a camera) whose `GlobalTransform` level of detail measures distances
/// from: with an `isocloth::ecs::ClothLod` resource, every tick sets its viewer to this
/// entity's position, so that the cloths nearest the camera get the most of the frame's
/// cloth budget (the first such entity counts).
#[derive(Component, Debug, Clone, Copy, Default)]
pub struct ClothViewer;

/// S1 (with a `ClothLod` resource): the viewer at the [`ClothViewer`] entity's position.
pub fn viewer_from_camera(
    viewers: Query<&GlobalTransform, With<ClothViewer>>,
    lod: Option<ResMut<ClothLod>>,
) {
    if let (Some(mut lod), Some(t)) = (lod, viewers.iter().next()) {
        let p = t.translation().as_dvec3();
        if p.is_finite() {
            lod.viewer = p;
        }
    }
}

/// The rotation and translation of `t` as a pose (scale dropped), finite or not.
fn rigid_pose(t: &GlobalTransform) -> Pose {
    let (_, r, p) = t.to_scale_rotation_translation();
    Pose::new(p.as_dvec3(), r.as_dquat().normalize())
}

/// The rotation and translation of `t` as a pose (scale dropped); `None` if not finite.
pub fn pose_of(t: &GlobalTransform) -> Option<Pose> {
    Some(rigid_pose(t)).filter(Pose::is_valid)
}

/// S1: builds the cloth of every [`SimulatedCloth`] whose mesh asset has loaded (see there).
#[allow(clippy::type_complexity)]
pub fn build_cloths(
    mut commands: Commands,
    cloths: Query<
        (
            Entity,
            &SimulatedCloth,
            &Mesh3d,
            &GlobalTransform,
            Option<&ClothConfigOverride>,
            Option<(&PinsFromSkin, Option<&SkinnedMesh>)>,
            Option<&ClothPinSettings>,
        ),
        (Without<ClothSim>, Without<ClothBuildError>),
    >,
    bones: Query<&GlobalTransform>,
    config: Res<ClothConfig>,
    mut meshes: ResMut<Assets<Mesh>>,
    bindposes: Option<Res<Assets<SkinnedMeshInverseBindposes>>>,
    mut models: ResMut<ClothModels>,
) {
    for (entity, spec, handle, transform, over, skin, pin_settings) in &cloths {
        let pin_settings = pin_settings.map_or_else(AttachmentSettings::default, |p| p.0);
        let Some(mesh) = meshes.get(&handle.0) else {
            continue; // not loaded yet
        };
        let source = handle.0.id();
        let config = over.map_or(&*config, |o| &o.0);
        let mut from_skin = None;
        if let Some((rule, skinned)) = skin {
            let inverse =
                skinned.and_then(|s| bindposes.as_ref().and_then(|a| a.get(&s.inverse_bindposes)));
            if skinned.is_some() && inverse.is_none() {
                continue; // the inverse bind poses are not loaded yet
            }
            match skin_pins(*rule, mesh, skinned.zip(inverse), &bones) {
                Ok((pins, read)) => {
                    let joints = skinned.map(|s| s.joints.clone()).unwrap_or_default();
                    from_skin = Some((pins, read, joints));
                }
                Err(e) => {
                    tracing::warn!("isocloth: cloth on {entity:?} not built: {e}");
                    commands.entity(entity).insert(ClothBuildError(e));
                    continue;
                }
            }
        }
        let result = match &from_skin {
            Some((pins, read, joints)) => {
                let spec = SimulatedCloth {
                    material: spec.material,
                    pins: spec.pins.iter().chain(pins).copied().collect(),
                };
                build(
                    &spec,
                    mesh,
                    source,
                    transform,
                    &bones,
                    config,
                    Some((read, joints)),
                    &mut models,
                    pin_settings,
                )
            }
            None => build(
                spec,
                mesh,
                source,
                transform,
                &bones,
                config,
                None,
                &mut models,
                pin_settings,
            ),
        };
        match result {
            Ok((sim, pins, limits, render)) => {
                // The cloth draws into a mesh asset of its own; the source stays as it was
                // (another entity may be made from it, or share it).
                let render = meshes.add(render);
                let mut e = commands.entity(entity);
                e.insert((sim, pins, Mesh3d(render)));
                if from_skin.is_some() {
                    e.remove::<SkinnedMesh>();
                }
                if let Some(limits) = limits {
                    // The painted max distance is this cloth's: its own config.
                    e.insert(ClothConfigOverride(ClothConfig {
                        limits,
                        ..config.clone()
                    }));
                }
            }
            Err(e) => {
                tracing::warn!("isocloth: cloth on {entity:?} not built: {e}");
                commands.entity(entity).insert(ClothBuildError(e));
            }
        }
    }
}

/// The pins [`PinsFromSkin`]'s `rule` finds on `mesh` (skinned by `skinned`: its joint
/// entities and inverse bind poses), and every vertex's world position at the joints' current
/// `GlobalTransform`s (a vertex with no weight stays where the mesh has it).
fn skin_pins(
    rule: PinsFromSkin,
    mesh: &Mesh,
    skinned: Option<(&SkinnedMesh, &SkinnedMeshInverseBindposes)>,
    bones: &Query<&GlobalTransform>,
) -> Result<(Vec<ClothPin>, SkinRead), BevyClothError> {
    let Some((skinned, inverse)) = skinned else {
        return Err(BevyClothError::NotSkinned(
            "the entity has no SkinnedMesh (joint entities and inverse bind poses)",
        ));
    };
    let skin = read_skin(mesh, skinned, inverse, |e| {
        bones.get(e).ok().map(|t| t.to_matrix())
    })?;
    let n = skin.world.len();
    let bad = |attribute: &'static str, reason: String| BevyClothError::BadAttribute {
        attribute,
        reason,
    };
    let paint: Option<Vec<f32>> = match rule {
        PinsFromSkin::Weights { threshold } => {
            if !(threshold.is_finite() && threshold > 0.0 && threshold <= 1.0) {
                return Err(bad(
                    "Vertex_JointWeight",
                    format!("threshold {threshold} is not in (0, 1]"),
                ));
            }
            None
        }
        PinsFromSkin::Painted { channel } => {
            if channel > 3 {
                return Err(bad(
                    "Vertex_Color",
                    format!("channel {channel} does not exist (0 to 3)"),
                ));
            }
            let colors = match mesh.try_attribute_option(Mesh::ATTRIBUTE_COLOR) {
                Ok(Some(VertexAttributeValues::Float32x4(c))) if c.len() == n => c,
                Ok(Some(VertexAttributeValues::Float32x4(c))) => {
                    return Err(bad(
                        "Vertex_Color",
                        format!("{} colours for {n} vertices", c.len()),
                    ));
                }
                Ok(Some(other)) => {
                    return Err(bad(
                        "Vertex_Color",
                        format!("{:?}, not Float32x4", VertexFormat::from(other)),
                    ));
                }
                Ok(None) => return Err(bad("Vertex_Color", "missing".into())),
                Err(_) => return Err(BevyClothError::NotInMainWorld),
            };
            let values: Vec<f32> = colors.iter().map(|c| c[channel as usize]).collect();
            if let Some(v) = values
                .iter()
                .position(|x| !(x.is_finite() && (0.0..=1.0).contains(x)))
            {
                return Err(bad(
                    "Vertex_Color",
                    format!("vertex {v} paints {} (must be in 0..=1)", values[v]),
                ));
            }
            Some(values)
        }
    };
    let mut pins = Vec::new();
    for v in 0..n {
        let (j, w) = (skin.joints[v], skin.weights[v]);
        let total: f32 = w.iter().sum();
        let pinned = match (&paint, rule) {
            (Some(values), _) => values[v] >= 0.5,
            (None, PinsFromSkin::Weights { threshold }) => total >= threshold,
            (None, PinsFromSkin::Painted { .. }) => false,
        };
        if !pinned {
            continue;
        }
        if total <= 1e-6 {
            return Err(bad(
                "Vertex_JointWeight",
                format!("vertex {v} is painted pinned but weighted to no joint"),
            ));
        }
        for k in (0..4).filter(|&k| w[k] > 0.0) {
            pins.push(ClothPin {
                vertex: v as u32,
                bone: skinned.joints[j[k] as usize],
                weight: w[k] / total,
            });
        }
    }
    if pins.is_empty() {
        return Err(BevyClothError::NoPins(rule));
    }
    let pinned = pins
        .iter()
        .fold((u32::MAX, 0usize), |(last, count), p| {
            if p.vertex == last {
                (last, count)
            } else {
                (p.vertex, count + 1)
            }
        })
        .1;
    if pinned == n {
        return Err(BevyClothError::AllPinned(rule));
    }
    Ok((pins, skin))
}

/// A skinned mesh's joint indices and weights (checked against its `SkinnedMesh`) and its
/// vertices' world positions by linear blend skinning at the joints' world transforms
/// (`joint_world(entity)`; a vertex with no weight stays where the mesh has it).
struct SkinRead {
    joints: Vec<[u16; 4]>,
    weights: Vec<[f32; 4]>,
    world: Vec<Vec3>,
}

fn read_skin(
    mesh: &Mesh,
    skinned: &SkinnedMesh,
    inverse: &SkinnedMeshInverseBindposes,
    joint_world: impl Fn(Entity) -> Option<Mat4>,
) -> Result<SkinRead, BevyClothError> {
    let bad = |attribute: &'static str, reason: String| BevyClothError::BadAttribute {
        attribute,
        reason,
    };
    let positions = match mesh.try_attribute_option(Mesh::ATTRIBUTE_POSITION) {
        Ok(Some(VertexAttributeValues::Float32x3(p))) => p,
        Ok(_) => return Err(BevyClothError::NoPositions),
        Err(_) => return Err(BevyClothError::NotInMainWorld),
    };
    let n = positions.len();
    let joints: &[[u16; 4]] = match mesh.try_attribute_option(Mesh::ATTRIBUTE_JOINT_INDEX) {
        Ok(Some(VertexAttributeValues::Uint16x4(j))) => j,
        Ok(Some(other)) => {
            return Err(bad(
                "Vertex_JointIndex",
                format!("{:?}, not Uint16x4", VertexFormat::from(other)),
            ));
        }
        Ok(None) => return Err(BevyClothError::NotSkinned("the mesh has no JOINT_INDEX")),
        Err(_) => return Err(BevyClothError::NotInMainWorld),
    };
    let weights: &[[f32; 4]] = match mesh.try_attribute_option(Mesh::ATTRIBUTE_JOINT_WEIGHT) {
        Ok(Some(VertexAttributeValues::Float32x4(w))) => w,
        Ok(Some(other)) => {
            return Err(bad(
                "Vertex_JointWeight",
                format!("{:?}, not Float32x4", VertexFormat::from(other)),
            ));
        }
        Ok(None) => return Err(BevyClothError::NotSkinned("the mesh has no JOINT_WEIGHT")),
        Err(_) => return Err(BevyClothError::NotInMainWorld),
    };
    if joints.len() != n || weights.len() != n {
        return Err(bad(
            "Vertex_JointIndex",
            format!(
                "{} joint sets and {} weight sets for {n} vertices",
                joints.len(),
                weights.len()
            ),
        ));
    }
    let slots = skinned.joints.len().min(inverse.len());
    if let Some(k) = joints.iter().flatten().find(|&&k| k as usize >= slots) {
        return Err(bad(
            "Vertex_JointIndex",
            format!("joint {k} past the SkinnedMesh's {slots} joints"),
        ));
    }
    if let Some(v) = weights
        .iter()
        .position(|w| w.iter().any(|x| !(x.is_finite() && *x >= 0.0)))
    {
        return Err(bad(
            "Vertex_JointWeight",
            format!("vertex {v} has a negative or non-finite weight"),
        ));
    }
    let skinning: Vec<Mat4> = (0..slots)
        .map(|k| {
            let e = skinned.joints[k];
            joint_world(e)
                .filter(|m| m.is_finite())
                .map(|m| m * inverse[k])
                .ok_or(BevyClothError::BadBone(e))
        })
        .collect::<Result<_, _>>()?;
    let world = (0..n)
        .map(|v| {
            let (j, w) = (joints[v], weights[v]);
            let total: f32 = w.iter().sum();
            let p = Vec3::from(positions[v]);
            if total > 1e-6 {
                (0..4)
                    .filter(|&k| w[k] > 0.0)
                    .map(|k| w[k] / total * skinning[j[k] as usize].transform_point3(p))
                    .sum()
            } else {
                p
            }
        })
        .collect();
    Ok(SkinRead {
        joints: joints.to_vec(),
        weights: weights.to_vec(),
        world,
    })
}

/// Fits collision capsules to a skinned body as Bevy's glTF loader spawns it (`body`: an entity
/// with a `Mesh3d` whose mesh carries `JOINT_INDEX`/`JOINT_WEIGHT`, and a `SkinnedMesh`), at
/// its joints' current `GlobalTransform`s, by the rule of
/// [`character::Character::fit_capsules`] (each vertex to the joint that dominates it; a joint
/// with at least `min_vertices` vertices gets a capsule of the median radius times `inset`),
/// and puts each on its joint entity as a [`ClothCollider`]. Returns how many. No
/// [`character::Character`] is involved: this is for a character the game spawned itself
/// (`SceneRoot`), e.g. once its scene is ready.
pub fn fit_body_capsules(
    world: &mut World,
    body: Entity,
    min_vertices: usize,
    inset: f32,
) -> Result<usize, BevyClothError> {
    let skinned = world
        .get::<SkinnedMesh>(body)
        .cloned()
        .ok_or(BevyClothError::NotSkinned(
            "the body entity has no SkinnedMesh",
        ))?;
    let handle = world
        .get::<Mesh3d>(body)
        .map(|m| m.0.clone())
        .ok_or(BevyClothError::NoPositions)?;
    let capsules = {
        let meshes = world.resource::<Assets<Mesh>>();
        let mesh = meshes.get(&handle).ok_or(BevyClothError::NotInMainWorld)?;
        let poses = world.resource::<Assets<SkinnedMeshInverseBindposes>>();
        let inverse = poses
            .get(&skinned.inverse_bindposes)
            .ok_or(BevyClothError::NotSkinned(
                "the inverse bind poses are not loaded",
            ))?;
        let joint_world = |e: Entity| world.get::<GlobalTransform>(e).map(|t| t.to_matrix());
        let skin = read_skin(mesh, &skinned, inverse, joint_world)?;
        let slots = skinned.joints.len();
        let mut owned: Vec<Vec<Vec3>> = vec![Vec::new(); slots];
        for ((p, j), w) in skin.world.iter().zip(&skin.joints).zip(&skin.weights) {
            let k = (0..4).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap_or(0);
            if w[k] > 0.0 {
                owned[j[k] as usize].push(*p);
            }
        }
        let rest: Vec<Mat4> = skinned
            .joints
            .iter()
            .map(|&e| joint_world(e).unwrap_or(Mat4::IDENTITY))
            .collect();
        character::fit_capsules_to_points(&owned, &rest, min_vertices, inset, false)
    };
    for c in &capsules {
        world
            .entity_mut(skinned.joints[c.joint])
            .insert(ClothCollider {
                shape: c.shape.clone(),
                offset: c.offset,
            });
    }
    Ok(capsules.len())
}

/// What a built cloth's model depends on besides its rest metric: the source mesh asset, the
/// entity's scale, the pinned vertices, the material and the solver settings (the last two by
/// their exact printed values). Rotation and translation leave the metric alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ModelKey {
    source: AssetId<Mesh>,
    scale: [u32; 3],
    pinned: Vec<u32>,
    material: String,
    settings: String,
}

/// The models the plugin built, shared by every cloth entity made from the same mesh asset
/// with the same scale, pinned vertices, material and budget (one factorisation for a crowd of
/// capes). Cloths pinned from their skin ([`PinsFromSkin`]) are built each on its own: their
/// rest shape is their skinned pose.
#[derive(Resource, Debug, Default)]
pub struct ClothModels {
    models: HashMap<ModelKey, Arc<ClothModel>>,
    built: usize,
}

impl ClothModels {
    /// How many models were built (each a factorisation); the entities sharing them are not
    /// counted again.
    pub fn built(&self) -> usize {
        self.built
    }
}

#[allow(clippy::too_many_arguments)]
fn build(
    spec: &SimulatedCloth,
    mesh: &Mesh,
    source: AssetId<Mesh>,
    transform: &GlobalTransform,
    bones: &Query<&GlobalTransform>,
    config: &ClothConfig,
    skinned: Option<(&SkinRead, &[Entity])>,
    models: &mut ClothModels,
    pin_settings: AttachmentSettings,
) -> Result<(ClothSim, ClothBones, Option<LimitSettings>, Mesh), BevyClothError> {
    let topology = mesh.primitive_topology();
    if topology != PrimitiveTopology::TriangleList {
        return Err(BevyClothError::NotTriangleList(topology));
    }
    let positions = match mesh.try_attribute_option(Mesh::ATTRIBUTE_POSITION) {
        Ok(Some(VertexAttributeValues::Float32x3(p))) => p,
        Ok(_) => return Err(BevyClothError::NoPositions),
        Err(_) => return Err(BevyClothError::NotInMainWorld),
    };
    let vertex_count = positions.len();
    // Vertices at exactly the same position are one cloth vertex (the first of them), as the
    // OBJ loader merges them: a mesh split at UV seams or hard edges is one cloth.
    let (weld, welded) = weld(positions);
    let world: Vec<Vec3> = welded
        .iter()
        .map(|&v| match skinned {
            Some((read, _)) => read.world[v as usize],
            None => transform.transform_point(Vec3::from(positions[v as usize])),
        })
        .collect();
    let indices: Vec<u32> = match mesh.try_indices_option() {
        Ok(Some(i)) => i.iter().map(|k| k as u32).collect(),
        Ok(None) => return Err(BevyClothError::NoIndices),
        Err(_) => return Err(BevyClothError::NotInMainWorld),
    };
    let source_triangles: Vec<[u32; 3]> = indices
        .chunks_exact(3)
        .map(|t| [t[0], t[1], t[2]])
        .collect();
    let triangles: Vec<[u32; 3]> = source_triangles
        .iter()
        // An index past the vertices stays past the cloth's, for the mesh check to name.
        .map(|t| t.map(|k| weld.get(k as usize).copied().unwrap_or(k)))
        .collect();
    // Painted max distance (metres per source vertex), if the mesh carries it.
    let painted_distance: Option<Vec<f32>> = match mesh.try_attribute_option(ATTRIBUTE_MAX_DISTANCE)
    {
        Ok(Some(VertexAttributeValues::Float32(d))) if d.len() == vertex_count => {
            if let Some(v) = d.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
                return Err(BevyClothError::BadAttribute {
                    attribute: "Vertex_MaxDistance",
                    reason: format!("vertex {v} paints {} (metres, finite and >= 0)", d[v]),
                });
            }
            Some(d.clone())
        }
        Ok(Some(other)) => {
            return Err(BevyClothError::BadAttribute {
                attribute: "Vertex_MaxDistance",
                reason: format!(
                    "{:?} with {} values for {vertex_count} vertices, not one Float32 each",
                    VertexFormat::from(other),
                    other.len()
                ),
            });
        }
        _ => None,
    };
    if painted_distance.is_some() && skinned.is_none() {
        return Err(BevyClothError::NotSkinned(
            "a painted max distance is measured from the skinned pose: add PinsFromSkin and the SkinnedMesh",
        ));
    }
    let uvs = match mesh.try_attribute_option(Mesh::ATTRIBUTE_UV_0) {
        Ok(Some(VertexAttributeValues::Float32x2(uv))) if uv.len() == vertex_count => {
            Some(uv.clone())
        }
        _ => None,
    };
    let cloth_mesh = ClothMesh::new(&BaseMesh::new(world, triangles))?;

    // Bones in order of first mention; each pinned vertex rigidly on its bone.
    let mut bone_list: Vec<Entity> = Vec::new();
    let mut vertex_bones: HashMap<u32, Vec<Influence>> = HashMap::new();
    for pin in &spec.pins {
        if pin.vertex as usize >= vertex_count {
            return Err(BevyClothError::NoSuchVertex {
                vertex: pin.vertex,
                count: vertex_count,
            });
        }
        if !(pin.weight.is_finite() && pin.weight > 0.0) {
            return Err(BevyClothError::BadWeight {
                vertex: pin.vertex,
                weight: pin.weight,
            });
        }
        let b = match bone_list.iter().position(|&e| e == pin.bone) {
            Some(b) => b,
            None => {
                bone_list.push(pin.bone);
                bone_list.len() - 1
            }
        } as u32;
        vertex_bones
            .entry(weld[pin.vertex as usize])
            .or_default()
            .push(Influence {
                bone: b,
                weight: f64::from(pin.weight),
            });
    }
    let bind_poses = bone_list
        .iter()
        .map(|&e| {
            bones
                .get(e)
                .ok()
                .and_then(pose_of)
                .ok_or(BevyClothError::BadBone(e))
        })
        .collect::<Result<Vec<Pose>, _>>()?;
    let mut pinned_vertices: Vec<u32> = vertex_bones.keys().copied().collect();
    pinned_vertices.sort_unstable();
    let nodes = cloth_mesh.nodes_for_vertices(&pinned_vertices, true);
    let base_count = cloth_mesh.base_vertex_count() as u32;
    let influences: Vec<(u32, Vec<Influence>)> = nodes
        .iter()
        .map(|&n| {
            let ends = if n < base_count {
                vec![n]
            } else {
                cloth_mesh.edges()[(n - base_count) as usize].to_vec()
            };
            // A red node blends its edge's two ends equally.
            let mut inf: Vec<Influence> = Vec::new();
            for v in ends {
                let own = &vertex_bones[&v];
                let total: f64 = own.iter().map(|i| i.weight).sum();
                for o in own {
                    match inf.iter_mut().find(|i| i.bone == o.bone) {
                        Some(i) => i.weight += o.weight / total,
                        None => inf.push(Influence {
                            bone: o.bone,
                            weight: o.weight / total,
                        }),
                    }
                }
            }
            (n, inf)
        })
        .collect();

    // Render vertices: one per cloth node, or with UVs one per (node, UV) pair, so that a node
    // on a UV seam keeps each side's UV (a red node takes the mean of its edge's two ends' UVs
    // as the triangle beside it has them).
    let render = uvs
        .as_ref()
        .map(|uv| render_vertices(&cloth_mesh, &source_triangles, uv));

    let settings = config.budget.settings(config.timestep, config.gravity)?;
    let cloth = if skinned.is_some() {
        Cloth::from_mesh(cloth_mesh, spec.material, &nodes, settings)?
    } else {
        let key = ModelKey {
            source,
            scale: transform.scale().to_array().map(f32::to_bits),
            pinned: pinned_vertices.clone(),
            material: format!("{:?}", spec.material),
            settings: format!("{settings:?}"),
        };
        match models.models.get(&key) {
            Some(model) => {
                // The same metric elsewhere: the shared model, at this entity's place.
                let mut cloth = Cloth::new(model.clone());
                cloth.set_positions(cloth_mesh.initial_positions())?;
                cloth
            }
            None => {
                let cloth = Cloth::from_mesh(cloth_mesh, spec.material, &nodes, settings)?;
                models.models.insert(key, cloth.model().clone());
                models.built += 1;
                cloth
            }
        }
    };
    // Max distance: every node skinned (its source vertex's weights; a red node blends its
    // edge's ends), measured from there.
    let mut limits = None;
    let mut skin_nodes: Vec<(u32, Vec<Influence>)> = Vec::new();
    let mut bind_poses = bind_poses;
    if let (Some(distance), Some((read, joints))) = (&painted_distance, skinned) {
        let mut bone_of = |e: Entity| -> Result<u32, BevyClothError> {
            Ok(match bone_list.iter().position(|&b| b == e) {
                Some(b) => b as u32,
                None => {
                    let pose = bones
                        .get(e)
                        .ok()
                        .and_then(pose_of)
                        .ok_or(BevyClothError::BadBone(e))?;
                    bone_list.push(e);
                    bind_poses.push(pose);
                    (bone_list.len() - 1) as u32
                }
            })
        };
        let mut vertex_influences: Vec<Vec<Influence>> = Vec::with_capacity(welded.len());
        for &v in &welded {
            let (j, w) = (read.joints[v as usize], read.weights[v as usize]);
            let total: f32 = w.iter().sum();
            if total <= 1e-6 {
                return Err(BevyClothError::BadAttribute {
                    attribute: "Vertex_JointWeight",
                    reason: format!(
                        "vertex {v} has a painted max distance but no joint weight to measure it from"
                    ),
                });
            }
            let mut inf = Vec::new();
            for k in (0..4).filter(|&k| w[k] > 0.0) {
                inf.push(Influence {
                    bone: bone_of(joints[j[k] as usize])?,
                    weight: f64::from(w[k] / total),
                });
            }
            vertex_influences.push(inf);
        }
        let mesh_ref = cloth.model().mesh();
        let base_count = mesh_ref.base_vertex_count();
        for n in 0..cloth.positions().len() {
            let inf = if n < base_count {
                vertex_influences[n].clone()
            } else {
                let [a, b] = mesh_ref.edges()[n - base_count];
                let mut inf: Vec<Influence> = Vec::new();
                for i in vertex_influences[a as usize]
                    .iter()
                    .chain(&vertex_influences[b as usize])
                {
                    match inf.iter_mut().find(|x| x.bone == i.bone) {
                        Some(x) => x.weight += 0.5 * i.weight,
                        None => inf.push(Influence {
                            bone: i.bone,
                            weight: 0.5 * i.weight,
                        }),
                    }
                }
                inf
            };
            skin_nodes.push((n as u32, inf));
        }
        let per_vertex: Vec<f32> = welded.iter().map(|&v| distance[v as usize]).collect();
        let max_distance = mesh_ref.node_values(&per_vertex)?;
        let settings = LimitSettings {
            max_distance,
            ..config.limits.clone()
        };
        settings.validate_for(cloth.positions().len())?;
        limits = Some(settings);
    }
    let (attachments, last_poses) = if bone_list.is_empty() {
        (
            Attachments::bind(
                &cloth,
                &[],
                &[Pose::IDENTITY],
                0,
                AttachmentSettings::default(),
            )?,
            vec![],
        )
    } else {
        let bound = Attachments::bind(&cloth, &influences, &bind_poses, 0, pin_settings)?;
        let bound = if skin_nodes.is_empty() {
            bound
        } else {
            bound.with_skin(&cloth, &skin_nodes, &bind_poses)?
        };
        (bound, bind_poses)
    };

    // The asset becomes the render mesh (vertex i = cloth node `render_nodes[i]`, or node i).
    let mut out = Mesh::new(PrimitiveTopology::TriangleList, mesh.asset_usage);
    let mut positions = Vec::new();
    let mut normals = Vec::new();
    cloth.write_render_mesh_in(&world_to_local(transform), &mut positions, &mut normals);
    let (render_nodes, uv, indices) = match render {
        Some(r) => (r.nodes, Some(r.uvs), r.indices),
        None => (Vec::new(), None, cloth.render_indices()),
    };
    let vertices = if render_nodes.is_empty() {
        positions.len()
    } else {
        render_nodes.len()
    };
    let per_vertex = |values: &[Vec3]| {
        let mut out = vec![[0.0; 3]; vertices];
        write_vertices(&mut out, values, &render_nodes);
        out
    };
    out.insert_attribute(Mesh::ATTRIBUTE_POSITION, per_vertex(&positions));
    out.insert_attribute(Mesh::ATTRIBUTE_NORMAL, per_vertex(&normals));
    if let Some(uv) = uv {
        out.insert_attribute(Mesh::ATTRIBUTE_UV_0, uv);
    }
    out.insert_indices(Indices::U32(indices));

    let bones = ClothBones {
        render_nodes,
        bones: bone_list,
        attachments,
        last_poses,
        lost: Vec::new(),
        last_error: None,
        render_scratch: (Vec::new(), Vec::new()),
    };
    Ok((ClothSim::new(cloth), bones, limits, out))
}

/// Per source vertex its cloth vertex, and the cloth vertices' source vertices: vertices at
/// exactly the same position (`+0.0` and `-0.0` alike) become the first of them.
fn weld(positions: &[[f32; 3]]) -> (Vec<u32>, Vec<u32>) {
    let mut first_at: HashMap<[u32; 3], u32> = HashMap::with_capacity(positions.len());
    let mut welded = Vec::with_capacity(positions.len());
    let of = positions
        .iter()
        .enumerate()
        .map(|(v, p)| {
            let key = p.map(|c| (c + 0.0).to_bits());
            *first_at.entry(key).or_insert_with(|| {
                welded.push(v as u32);
                welded.len() as u32 - 1
            })
        })
        .collect();
    (of, welded)
}

/// A render mesh whose vertices are (cloth node, UV) pairs: vertex `i < nodes` is node `i`
/// with the first UV a triangle gives it, and a node that triangles give other UVs (a seam) has
/// further vertices after those.
struct RenderVertices {
    /// Per vertex, its node (`0..node_count` first, then the seams' extra vertices); empty
    /// when no node has a second UV (vertex `i` is node `i`).
    nodes: Vec<u32>,
    uvs: Vec<[f32; 2]>,
    indices: Vec<u32>,
}

/// The render triangles of `cloth_mesh` (four per source triangle, in order) with each corner's
/// UV from the source triangle's corners (an edge's midpoint: the mean of its ends').
fn render_vertices(
    cloth_mesh: &ClothMesh,
    source_triangles: &[[u32; 3]],
    uv: &[[f32; 2]],
) -> RenderVertices {
    let node_count = cloth_mesh.node_count();
    let mut out = RenderVertices {
        nodes: Vec::new(),
        uvs: vec![[f32::NAN; 2]; node_count],
        indices: Vec::with_capacity(12 * source_triangles.len()),
    };
    let key = |t: [f32; 2]| t.map(|x| (x + 0.0).to_bits());
    let mut extra: HashMap<(u32, [u32; 2]), u32> = HashMap::new();
    let mid = |a: [f32; 2], b: [f32; 2]| [0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1])];
    for (src, quad) in source_triangles
        .iter()
        .zip(cloth_mesh.render_triangles().chunks_exact(4))
    {
        let [a, b, c] = src.map(|v| uv[v as usize]);
        let (ab, bc, ca) = (mid(a, b), mid(b, c), mid(c, a));
        // The corners' UVs in the order `ClothMesh` writes the four triangles.
        let corners = [[a, ab, ca], [ab, b, bc], [ca, bc, c], [ab, bc, ca]];
        for (tri, uvs) in quad.iter().zip(corners) {
            for (&node, t) in tri.iter().zip(uvs) {
                let own = &mut out.uvs[node as usize];
                let v = if own[0].is_nan() {
                    *own = t;
                    node
                } else if key(*own) == key(t) {
                    node
                } else {
                    *extra.entry((node, key(t))).or_insert_with(|| {
                        out.nodes.push(node);
                        out.uvs.push(t);
                        out.uvs.len() as u32 - 1
                    })
                };
                out.indices.push(v);
            }
        }
    }
    if !out.nodes.is_empty() {
        let tail = std::mem::take(&mut out.nodes);
        out.nodes = (0..node_count as u32).chain(tail).collect();
    }
    out
}

/// Per-node `values` into the render mesh's vertices `out` (vertex `i` shows node
/// `render_nodes[i]`, or node `i` when `render_nodes` is empty); a vertex count that does not
/// match (the asset was replaced) leaves `out` as it is.
fn write_vertices(out: &mut [[f32; 3]], values: &[Vec3], render_nodes: &[u32]) {
    if render_nodes.is_empty() {
        if out.len() == values.len() {
            for (o, v) in out.iter_mut().zip(values) {
                *o = v.to_array();
            }
        }
    } else if out.len() == render_nodes.len() {
        for (o, &n) in out.iter_mut().zip(render_nodes) {
            *o = values[n as usize].to_array();
        }
    }
}

/// The map from world space into the frame of `transform` (f64, as the cloth's positions).
fn world_to_local(transform: &GlobalTransform) -> glam::DAffine3 {
    transform.affine().as_daffine3().inverse()
}

/// S1: poses the shared collider set from the [`ClothCollider`] entities' `GlobalTransform`s
/// ([`ClothColliders::gather`]): a new entity adds a collider, a despawned one (or one that lost
/// the component) removes it. Bad data (a non-finite transform) is skipped and reported in
/// [`ClothColliders::skipped`] (the collider keeps its last pose); a jump beyond
/// [`ClothConfig::collider_teleport_distance`] teleports.
pub fn gather_colliders(
    entities: Query<(
        Entity,
        &GlobalTransform,
        &ClothCollider,
        Option<&ClothCollisionGroups>,
    )>,
    config: Res<ClothConfig>,
    mut colliders: ResMut<ClothColliders>,
) {
    colliders.gather_grouped(
        entities.iter().map(|(entity, t, c, groups)| {
            (
                entity,
                c.shape.clone(),
                rigid_pose(t).mul(&c.offset),
                groups.map_or(CollisionGroups::ALL, |g| g.0),
            )
        }),
        config.collider_teleport_distance,
    );
}

/// S1 (after the pins): the nodes a cloth's pins hold, and the rings around them, are not
/// pushed by the colliders of the bone entities that hold them where those colliders already
/// hold them (the node inside the contact layer;
/// [`isocloth::AttachmentSettings::unpushed_rings`], default one ring): a neck or collar
/// capsule around the pinned row would push it against its pins. Computed again only when the
/// collider set's membership or the pins change.
pub fn exclude_pin_bodies(
    mut cloths: Query<(Entity, &mut ClothSim, &ClothBones)>,
    colliders: Res<ClothColliders>,
    mut keys: Local<HashMap<Entity, u64>>,
) {
    let mut seen = 0;
    for (entity, mut sim, bones) in &mut cloths {
        seen += 1;
        update_pin_exclusions(
            entity,
            &mut sim,
            &bones.bones,
            &bones.attachments,
            &colliders,
            &mut keys,
        );
    }
    // Despawned cloths leave their keys behind: drop them (no state grows under churn).
    if keys.len() > seen {
        keys.retain(|e, _| cloths.contains(*e));
    }
}

/// S1: pinned vertices follow their bones. A bone that is despawned or has a non-finite
/// `GlobalTransform` holds its pins at its last good pose, with a warning logged once and the
/// bone listed in [`ClothBones::lost`] until it comes back.
/// Cloths in parallel (rayon), as the ECS layer drives its attachments.
pub fn drive_pins(
    mut cloths: Query<(Entity, &mut ClothSim, &mut ClothBones)>,
    bones: Query<&GlobalTransform>,
    lod: Option<Res<ClothLod>>,
) {
    let lod = lod.as_deref();
    let mut all: Vec<_> = cloths.iter_mut().collect();
    all.par_iter_mut().for_each(|(entity, sim, pins)| {
        let entity = *entity;
        let pins = &mut **pins;
        if pins.bones.is_empty() {
            return;
        }
        for (k, &bone) in pins.bones.iter().enumerate() {
            match bones.get(bone).ok().and_then(pose_of) {
                Some(p) => {
                    pins.last_poses[k] = p;
                    pins.lost.retain(|&b| b != bone);
                }
                None if !pins.lost.contains(&bone) => {
                    tracing::warn!(
                        "isocloth: bone {bone:?} of the cloth on {entity:?} is gone or not \
                         finite; its pins hold their last pose"
                    );
                    pins.lost.push(bone);
                }
                None => {}
            }
        }
        // As the ECS layer drives its attachments: a cloth following its skin this tick
        // needs no inertia carry, and only what it reads of its skin.
        let carry = lod.is_none_or(|l| l.simulates(entity));
        pins.last_error = pins
            .attachments
            .apply_using(
                &mut sim.cloth,
                &pins.last_poses,
                carry,
                skin_use(lod, entity),
            )
            .err();
    });
}

/// S3: each built cloth's render positions and normals into its `Mesh` asset, in the entity's
/// local frame, in place (no allocation once the asset holds the render mesh and each cloth's
/// scratch has grown). Positions and normals are computed for every cloth in parallel (rayon)
/// into its [`ClothBones`]' scratch, then copied into the assets.
pub fn write_meshes(
    mut cloths: Query<(
        &ClothSim,
        &Mesh3d,
        &GlobalTransform,
        &mut ClothBones,
        Option<&ClothDrawn>,
    )>,
    mut meshes: ResMut<Assets<Mesh>>,
) {
    let mut all: Vec<_> = cloths
        .iter_mut()
        .filter(|item| item.4.is_none_or(|d| d.0))
        .collect();
    all.par_iter_mut()
        .for_each(|(sim, _, transform, bones, _)| {
            let (positions, normals) = &mut bones.render_scratch;
            sim.cloth
                .write_render_mesh_in(&world_to_local(transform), positions, normals);
        });
    for (_, handle, _, bones, _) in &all {
        let Some(mut mesh) = meshes.get_mut(&handle.0) else {
            continue;
        };
        let (positions, normals) = &bones.render_scratch;
        for (attribute, values) in [
            (Mesh::ATTRIBUTE_POSITION, positions),
            (Mesh::ATTRIBUTE_NORMAL, normals),
        ] {
            let Ok(Some(VertexAttributeValues::Float32x3(out))) =
                mesh.try_attribute_mut_option(attribute)
            else {
                continue;
            };
            write_vertices(out, values, &bones.render_nodes);
        }
    }
}

/// Plays a [`character::Character`]'s clip on its joint entities (see [`spawn_character`]):
/// each fixed tick, before the cloth systems, every joint entity's `Transform` and
/// `GlobalTransform` become the joint's world transform at the clip's time (looped), so the
/// tick's cloth sees this tick's pose.
#[derive(Component, Debug)]
pub struct CharacterPlayer {
    /// The character.
    pub character: std::sync::Arc<character::Character>,
    /// The clip played.
    pub clip: usize,
    /// One entity per skin joint, in joint order.
    pub joints: Vec<Entity>,
    /// Fixed ticks played.
    pub ticks: u64,
    scratch: Vec<Mat4>,
}

/// Spawns one root entity per joint of `character` at time 0 of `clip`, with a
/// [`ClothCollider`] on each joint that [`character::Character::fit_capsules`] fits (30
/// vertices at least, radius inset 0.9), and a [`CharacterPlayer`] entity that plays the clip
/// from the next tick. Returns the player entity; its `joints` are the joint entities.
pub fn spawn_character(
    world: &mut World,
    character: std::sync::Arc<character::Character>,
    clip: usize,
) -> Entity {
    let mut pose = Vec::new();
    character.joint_transforms(Some(clip), 0.0, &mut pose);
    let joints: Vec<Entity> = pose
        .iter()
        .map(|m| {
            world
                .spawn((Transform::from_matrix(*m), GlobalTransform::from(*m)))
                .id()
        })
        .collect();
    for c in character.fit_capsules(30, 0.9) {
        world.entity_mut(joints[c.joint]).insert(ClothCollider {
            shape: c.shape,
            offset: c.offset,
        });
    }
    world
        .spawn(CharacterPlayer {
            character,
            clip,
            joints,
            ticks: 0,
            scratch: pose,
        })
        .id()
}

/// Spawns a skinned mesh ([`character::SkinnedPart`]) as Bevy's glTF loader spawns one: a
/// `Mesh3d` with `POSITION`, `JOINT_INDEX`, `JOINT_WEIGHT` (and `COLOR` and
/// [`ATTRIBUTE_MAX_DISTANCE`] if the part has them) and a `SkinnedMesh` naming `joints[slot]` for each skin slot (the character's joint
/// entities) with the part's inverse bind poses.
pub fn spawn_skinned_mesh(
    world: &mut World,
    part: &character::SkinnedPart,
    joints: &[Entity],
) -> Entity {
    let mut mesh = Mesh::new(
        PrimitiveTopology::TriangleList,
        RenderAssetUsages::default(),
    );
    mesh.insert_attribute(
        Mesh::ATTRIBUTE_POSITION,
        part.positions
            .iter()
            .map(|p| p.to_array())
            .collect::<Vec<_>>(),
    );
    mesh.insert_attribute(
        Mesh::ATTRIBUTE_JOINT_INDEX,
        VertexAttributeValues::Uint16x4(part.joint_indices.clone()),
    );
    mesh.insert_attribute(Mesh::ATTRIBUTE_JOINT_WEIGHT, part.joint_weights.clone());
    if let Some(c) = &part.colors {
        mesh.insert_attribute(Mesh::ATTRIBUTE_COLOR, c.clone());
    }
    if let Some(d) = &part.max_distance {
        mesh.insert_attribute(ATTRIBUTE_MAX_DISTANCE, d.clone());
    }
    mesh.insert_indices(Indices::U32(part.indices.clone()));
    let handle = world.resource_mut::<Assets<Mesh>>().add(mesh);
    let bindposes = world
        .resource_mut::<Assets<SkinnedMeshInverseBindposes>>()
        .add(SkinnedMeshInverseBindposes::from(
            part.inverse_bindposes.clone(),
        ));
    world
        .spawn((
            Mesh3d(handle),
            Transform::default(),
            GlobalTransform::default(),
            SkinnedMesh {
                inverse_bindposes: bindposes,
                joints: part.joints.iter().map(|&j| joints[j]).collect(),
            },
        ))
        .id()
}

/// [`spawn_skinned_mesh`] for a file's cloth mesh (read by
/// [`character::Character::from_file_with_cloth`]), with a [`SimulatedCloth`] of `material`
/// whose pins come from its skin by `rule` ([`PinsFromSkin`]).
pub fn spawn_skinned_cloth(
    world: &mut World,
    cloth: &character::SkinnedPart,
    joints: &[Entity],
    material: Material,
    rule: PinsFromSkin,
) -> Entity {
    let e = spawn_skinned_mesh(world, cloth, joints);
    world.entity_mut(e).insert((
        SimulatedCloth {
            material,
            pins: Vec::new(),
        },
        rule,
    ));
    e
}

/// Before S1: poses every [`CharacterPlayer`]'s joint entities at its clip's time
/// (`ticks x ClothConfig::timestep`), then counts the tick.
pub fn play_characters(
    mut players: Query<&mut CharacterPlayer>,
    mut joints: Query<(&mut Transform, &mut GlobalTransform)>,
    config: Res<ClothConfig>,
) {
    for mut player in &mut players {
        let player = &mut *player;
        let t = (player.ticks as f64 * config.timestep) as f32;
        player
            .character
            .joint_transforms(Some(player.clip), t, &mut player.scratch);
        for (m, &e) in player.scratch.iter().zip(&player.joints) {
            if let Ok((mut tr, mut gt)) = joints.get_mut(e) {
                *tr = Transform::from_matrix(*m);
                *gt = GlobalTransform::from(*m);
            }
        }
        player.ticks += 1;
    }
}

impl character::CapeLayout {
    /// The cape's source mesh for a `Mesh3d` (positions and triangles).
    pub fn mesh(&self) -> Mesh {
        Mesh::new(
            PrimitiveTopology::TriangleList,
            RenderAssetUsages::default(),
        )
        .with_inserted_attribute(
            Mesh::ATTRIBUTE_POSITION,
            self.positions
                .iter()
                .map(|p| p.to_array())
                .collect::<Vec<_>>(),
        )
        .with_inserted_indices(Indices::U32(self.indices.clone()))
    }

    /// Its pins on the joint entities `joints` (joint order, as in [`CharacterPlayer::joints`]).
    pub fn cloth_pins(&self, joints: &[Entity]) -> Vec<ClothPin> {
        self.pins
            .iter()
            .map(|&(vertex, joint, weight)| ClothPin {
                vertex,
                bone: joints[joint],
                weight,
            })
            .collect()
    }

    /// Spawns the cape in `world`: its mesh added to the `Mesh` assets, a [`SimulatedCloth`]
    /// of `material` pinned on the joint entities `joints` ([`Self::cloth_pins`]), its
    /// pins driven with `pins` ([`ClothPinSettings`]; `rigid_pins: true` moves a collar whose
    /// bones blend differently along it as one piece). Returns the cloth's entity.
    pub fn spawn(
        &self,
        world: &mut World,
        joints: &[Entity],
        material: Material,
        pins: AttachmentSettings,
    ) -> Entity {
        let cloth_pins = self.cloth_pins(joints);
        let handle = world.resource_mut::<Assets<Mesh>>().add(self.mesh());
        world
            .spawn((
                Mesh3d(handle),
                Transform::default(),
                SimulatedCloth {
                    material,
                    pins: cloth_pins,
                },
                ClothPinSettings(pins),
            ))
            .id()
    }
}

/// The README's code blocks, compiled and run as doc tests of this crate (its Bevy snippet
/// needs both crates), so that the front page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
