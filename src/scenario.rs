//! Scenario files (RON) for tuning budgets per platform, run headless through the ECS layer.
//!
//! A scenario names a base mesh (an OBJ file, or a generated rectangle or disc), where it is
//! placed, which vertices are pinned (indices or a box), the material, the budget preset,
//! colliders with their motion (static, keyframed, or the built-in character of [`crate::rig`]),
//! whether pins follow the character's chest and clavicles, gravity, wind, contact settings and
//! the frame count. See `scenarios/*.ron` and the `scenario` example. A malformed or hostile file
//! gives a [`ScenarioError`] naming the problem: sizes, coordinates and frame counts are capped
//! so a file cannot make the runner hang or exhaust memory.

use std::path::Path;
use std::time::Instant;

use bevy_ecs::prelude::*;
use glam::{DQuat, DVec3, Vec3};
use serde::Deserialize;
use thiserror::Error;

use crate::aero::Aerodynamics;
use crate::attachment::{AttachmentSettings, Attachments};
use crate::cloth::Cloth;
use crate::collision::{ColliderShape, ContactSettings, Pose};
use crate::ecs::{
    BoneCollider, BonePose, BudgetPreset, ClothAttachments, ClothColliders, ClothConfig,
    ClothRenderMesh, ClothSim, add_cloth_systems, init_cloth_resources, spawn_character_bones,
};
use crate::energy::Material;
use crate::mesh::{BaseMesh, ClothMesh};
use crate::obj::{ObjMesh, ObjOptions};
use crate::rig::{self, Animation, CharacterRig};

/// Why a scenario could not run: one line naming the problem.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{0}")]
pub struct ScenarioError(pub String);

impl From<String> for ScenarioError {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for ScenarioError {
    fn from(s: &str) -> Self {
        Self(s.to_string())
    }
}

/// Most frames a scenario may run (about 28 minutes at 60 Hz).
const MAX_FRAMES: u32 = 100_000;
/// Most base-mesh cells along one side of a generated mesh.
const MAX_CELLS: usize = 512;
/// Most nodes of a subdivided scenario mesh.
const MAX_NODES: usize = 40_000;
/// Largest coordinate, size or speed accepted anywhere (metres, m/s).
const MAX_SIZE: f64 = 1e4;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    name: String,
    mesh: MeshSource,
    #[serde(default)]
    placement: Placement,
    #[serde(default)]
    pins: Pins,
    #[serde(default)]
    material: Material,
    #[serde(default)]
    budget: Budget,
    #[serde(default)]
    colliders: Vec<ColliderSpec>,
    #[serde(default)]
    character: Option<CharacterSpec>,
    #[serde(default = "default_gravity")]
    gravity: (f64, f64, f64),
    #[serde(default)]
    wind: Option<(f64, f64, f64)>,
    #[serde(default)]
    contact: ContactSettings,
    /// Frames run.
    pub frames: u32,
}

fn default_gravity() -> (f64, f64, f64) {
    (0.0, -9.81, 0.0)
}

#[derive(Deserialize)]
enum MeshSource {
    /// `width` x `height` m in the x-y plane (y up), `cells_x` x `cells_y` base cells.
    Rectangle {
        width: f64,
        height: f64,
        cells_x: usize,
        cells_y: usize,
    },
    /// A disc of `radius` in the x-z plane, `rings` rings of `segments` triangles.
    Disc {
        radius: f64,
        rings: usize,
        segments: usize,
    },
    /// An OBJ file (path relative to the scenario file), read by the rules of [`crate::obj`];
    /// `keep_open` lists OBJ vertices (0-based) never merged with others at their position.
    Obj {
        path: String,
        #[serde(default)]
        keep_open: Vec<u32>,
    },
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Placement {
    #[serde(default)]
    translation: (f64, f64, f64),
    /// Rotation about x, y, z in degrees (applied in that order).
    #[serde(default)]
    rotation_deg: (f64, f64, f64),
}

#[derive(Deserialize, Default)]
enum Pins {
    #[default]
    None,
    /// Base-mesh vertex indices.
    Vertices(Vec<u32>),
    /// Every base vertex inside this box after placement (and the edges between them).
    Box {
        min: (f64, f64, f64),
        max: (f64, f64, f64),
    },
}

#[derive(Deserialize, Default)]
enum Budget {
    Mobile,
    #[default]
    Console,
    Desktop,
    Custom(BudgetPreset),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ColliderSpec {
    shape: ColliderShape,
    motion: Motion,
}

#[derive(Deserialize)]
enum Motion {
    Static {
        translation: (f64, f64, f64),
        #[serde(default)]
        rotation_deg: (f64, f64, f64),
    },
    /// (time in s, translation, rotation in degrees), linear between keys, held after the last.
    Keyframes(Vec<Keyframe>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CharacterSpec {
    animation: Animation,
    /// Pins follow the chest and clavicles (skinned), as a cape would.
    #[serde(default)]
    attach_pins: bool,
    #[serde(default = "one")]
    linear_inertia: f64,
    #[serde(default = "one")]
    angular_inertia: f64,
}

fn one() -> f64 {
    1.0
}

type Fallible<T> = Result<T, ScenarioError>;

/// (time in s, translation in m, rotation about x, y, z in degrees).
type Keyframe = (f64, (f64, f64, f64), (f64, f64, f64));

fn vec3(v: (f64, f64, f64), what: &str) -> Fallible<DVec3> {
    let d = DVec3::new(v.0, v.1, v.2);
    if !d.is_finite() || d.abs().max_element() > MAX_SIZE {
        return Err(format!("{what} must be finite and within {MAX_SIZE} m: {v:?}").into());
    }
    Ok(d)
}

fn rotation(deg: (f64, f64, f64), what: &str) -> Fallible<DQuat> {
    let r = vec3(deg, what)?;
    Ok(DQuat::from_rotation_z(r.z.to_radians())
        * DQuat::from_rotation_y(r.y.to_radians())
        * DQuat::from_rotation_x(r.x.to_radians()))
}

fn size(v: f64, what: &str) -> Fallible<f32> {
    if !(v.is_finite() && v > 0.0 && v <= MAX_SIZE) {
        return Err(format!("{what} must be finite, positive and at most {MAX_SIZE}: {v}").into());
    }
    Ok(v as f32)
}

fn cells(v: usize, what: &str) -> Fallible<usize> {
    if v == 0 || v > MAX_CELLS {
        return Err(format!("{what} must be in 1..={MAX_CELLS}: {v}").into());
    }
    Ok(v)
}

fn disc(radius: f32, rings: usize, segments: usize) -> BaseMesh {
    let mut positions = vec![Vec3::ZERO];
    let mut triangles = Vec::new();
    for r in 1..=rings {
        let rr = radius * r as f32 / rings as f32;
        for s in 0..segments {
            let a = std::f32::consts::TAU * s as f32 / segments as f32;
            positions.push(Vec3::new(rr * a.cos(), 0.0, rr * a.sin()));
        }
    }
    let idx = |r: usize, s: usize| -> u32 {
        if r == 0 {
            0
        } else {
            (1 + (r - 1) * segments + s % segments) as u32
        }
    };
    for r in 0..rings {
        for s in 0..segments {
            if r == 0 {
                triangles.push([0, idx(1, s + 1), idx(1, s)]);
            } else {
                let (a, b, c, d) = (idx(r, s), idx(r, s + 1), idx(r + 1, s), idx(r + 1, s + 1));
                triangles.push([a, d, c]);
                triangles.push([a, b, d]);
            }
        }
    }
    BaseMesh::new(positions, triangles)
}

fn load_obj(path: &Path, keep_open: &[u32]) -> Fallible<ObjMesh> {
    let file = std::fs::File::open(path).map_err(|e| format!("mesh {}: {e}", path.display()))?;
    let options = ObjOptions {
        keep_open: keep_open.to_vec(),
    };
    ObjMesh::read(&mut std::io::BufReader::new(file), &options)
        .map_err(|e| format!("mesh {}: {e}", path.display()).into())
}

/// Reads a base mesh from OBJ text by the rules of [`crate::obj`] (all objects merged, polygons
/// triangulated in their plane, vertices at one position merged, materials ignored). The mesh
/// itself is checked by [`ClothMesh::new`].
pub fn obj_mesh(reader: &mut impl std::io::BufRead) -> Result<BaseMesh, ScenarioError> {
    ObjMesh::read(reader, &ObjOptions::default())
        .map(|m| m.base)
        .map_err(|e| e.to_string().into())
}

/// The scenario's base mesh, placed, and the OBJ it came from (to locate mesh errors in it).
fn base_mesh(s: &Scenario, dir: &Path) -> Fallible<(BaseMesh, Option<ObjMesh>)> {
    let mut obj = None;
    let base = match &s.mesh {
        MeshSource::Rectangle {
            width,
            height,
            cells_x,
            cells_y,
        } => BaseMesh::rectangle(
            size(*width, "mesh width")?,
            size(*height, "mesh height")?,
            cells(*cells_x, "cells_x")?,
            cells(*cells_y, "cells_y")?,
        )
        .map_err(|e| format!("mesh: {e}"))?,
        MeshSource::Disc {
            radius,
            rings,
            segments,
        } => {
            let segments = cells(*segments, "segments")?.max(3);
            disc(
                size(*radius, "disc radius")?,
                cells(*rings, "rings")?,
                segments,
            )
        }
        MeshSource::Obj { path, keep_open } => {
            let loaded = load_obj(&dir.join(path), keep_open)?;
            let base = loaded.base.clone();
            obj = Some(loaded);
            base
        }
    };
    let place = Pose::new(
        vec3(s.placement.translation, "placement translation")?,
        rotation(s.placement.rotation_deg, "placement rotation")?,
    );
    let placed = base.map_positions(|p| place.transform_point(p.as_dvec3()).as_vec3());
    Ok((placed, obj))
}

fn pinned_vertices(s: &Scenario, base: &BaseMesh) -> Fallible<Vec<u32>> {
    match &s.pins {
        Pins::None => Ok(Vec::new()),
        Pins::Vertices(v) => {
            if let Some(bad) = v.iter().find(|&&i| i as usize >= base.positions.len()) {
                return Err(format!(
                    "pin vertex {bad} does not exist (the mesh has {} vertices)",
                    base.positions.len()
                )
                .into());
            }
            Ok(v.clone())
        }
        Pins::Box { min, max } => {
            let (lo, hi) = (vec3(*min, "pin box min")?, vec3(*max, "pin box max")?);
            Ok((0..base.positions.len() as u32)
                .filter(|&i| {
                    let p = base.positions[i as usize].as_dvec3();
                    p.cmpge(lo).all() && p.cmple(hi).all()
                })
                .collect())
        }
    }
}

fn keyframe_pose(keys: &[Keyframe], t: f64) -> Fallible<Pose> {
    let pose = |k: &Keyframe| -> Fallible<Pose> {
        Ok(Pose::new(
            vec3(k.1, "keyframe translation")?,
            rotation(k.2, "keyframe rotation")?,
        ))
    };
    let first = keys.first().ok_or("keyframes: empty list")?;
    if t <= first.0 {
        return pose(first);
    }
    for w in keys.windows(2) {
        if t <= w[1].0 {
            let s = (t - w[0].0) / (w[1].0 - w[0].0).max(1e-9);
            return Ok(pose(&w[0])?.interpolate(&pose(&w[1])?, s));
        }
    }
    pose(keys.last().ok_or("keyframes: empty list")?)
}

/// What a scenario run measured.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Frames run.
    pub frames: u32,
    /// Cloth nodes.
    pub nodes: usize,
    /// Wall time of each tick, ms.
    pub times: Vec<f64>,
    /// Worst max render-mesh strain over the frames.
    pub max_strain: f64,
    /// Worst mean strain over the frames.
    pub mean_strain: f64,
    /// Deepest node inside a body's thickness layer, m.
    pub max_penetration_m: f64,
    /// Worst conformity residual.
    pub conformity_residual: f64,
    /// Frames with a non-finite position.
    pub nan_frames: u32,
    /// Iterations per tick.
    pub iterations: u32,
}

/// Reads, validates and runs the scenario file at `path` headless through the ECS layer,
/// writing an OBJ per frame under `obj_dir` if given. Returns the scenario's name and what was
/// measured, or one error naming the problem; it never panics on bad input and caps sizes and
/// frame counts so that it cannot hang.
pub fn run(path: &Path, obj_dir: Option<&Path>) -> Result<(String, bool, Summary), ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let loaded = load(&text, dir).map_err(|e| format!("{}: {e}", path.display()))?;
    loaded.run(obj_dir)
}

/// A scenario parsed, validated and set up in its own [`World`], ready to run.
pub struct LoadedScenario {
    name: String,
    frames: u32,
    world: World,
    schedule: Schedule,
    rig: Option<CharacterRig>,
    poses: Vec<Pose>,
    bone_entities: Vec<Entity>,
    keyed: Vec<(Entity, Vec<Keyframe>)>,
    cloth_entity: Entity,
    nodes: usize,
}

/// Parses and validates scenario text and builds its world (mesh, factorisation, colliders,
/// character) without running a frame. OBJ paths are relative to `dir`. Every problem is one
/// [`ScenarioError`]; text over 16 MiB, meshes over 40,000 nodes and more than 100,000 frames
/// are refused.
pub fn load(text: &str, dir: &Path) -> Result<LoadedScenario, ScenarioError> {
    if text.len() > 16 << 20 {
        return Err("larger than 16 MiB".into());
    }
    let s: Scenario = ron::from_str(text).map_err(|e| e.to_string())?;
    if s.frames == 0 || s.frames > MAX_FRAMES {
        return Err(format!("frames must be in 1..={MAX_FRAMES}: {}", s.frames).into());
    }
    let (base, obj) = base_mesh(&s, dir)?;
    let pinned = pinned_vertices(&s, &base)?;
    if s.character.as_ref().is_some_and(|c| c.attach_pins) && pinned.is_empty() {
        return Err("character: attach_pins needs pinned vertices (pins is empty)".into());
    }
    // Every edge borders at most two triangles, so subdivision gives at least V + 3T/2 nodes:
    // refuse an oversized mesh before building it.
    let at_least = base.positions.len() + 3 * base.triangles.len() / 2;
    if at_least > MAX_NODES {
        return Err(format!(
            "mesh: at least {at_least} nodes after subdivision, at most {MAX_NODES}"
        )
        .into());
    }
    let mesh = ClothMesh::new(&base).map_err(|e| match &obj {
        Some(obj) => format!("mesh: {}", obj.describe(&e)),
        None => format!("mesh: {e}"),
    })?;
    if mesh.node_count() > MAX_NODES {
        return Err(format!(
            "mesh: {} nodes after subdivision, at most {MAX_NODES}",
            mesh.node_count()
        )
        .into());
    }
    let pins = mesh.nodes_for_vertices(&pinned, true);
    let budget = match &s.budget {
        Budget::Mobile => BudgetPreset::mobile(),
        Budget::Console => BudgetPreset::console(),
        Budget::Desktop => BudgetPreset::desktop(),
        Budget::Custom(p) => p.clone(),
    };
    let gravity = vec3(s.gravity, "gravity")?;
    let settings = budget
        .settings(1.0 / 60.0, gravity)
        .map_err(|e| format!("budget: {e}"))?;
    let mut cloth =
        Cloth::from_mesh(mesh, s.material, &pins, settings).map_err(|e| format!("cloth: {e}"))?;
    let aero = match s.wind {
        Some(w) => Aerodynamics::cloth(vec3(w, "wind")?),
        None => Aerodynamics::default(),
    };
    let config = ClothConfig {
        budget,
        gravity,
        contact: s.contact,
        aero,
        ..Default::default()
    };
    // Validate through the same setters the systems use, so errors name the setting.
    cloth
        .set_contact_settings(config.contact)
        .and_then(|_| cloth.set_aerodynamics(config.aero))
        .map_err(|e| format!("settings: {e}"))?;

    let mut world = World::new();
    init_cloth_resources(&mut world);
    world.insert_resource(config);
    let mut schedule = Schedule::default();
    add_cloth_systems(&mut schedule);

    let rig = s
        .character
        .as_ref()
        .map(|c| CharacterRig::new(c.animation, DVec3::ZERO, 0.0));
    let mut poses = Vec::new();
    let bone_entities = match &rig {
        Some(r) => {
            r.poses(&mut poses);
            spawn_character_bones(&mut world, &poses)
        }
        None => Vec::new(),
    };
    let mut keyed = Vec::new();
    for (k, c) in s.colliders.iter().enumerate() {
        c.shape
            .validate()
            .map_err(|e| format!("collider {k}: {e}"))?;
        let pose = match &c.motion {
            Motion::Static {
                translation,
                rotation_deg,
            } => Pose::new(
                vec3(*translation, "collider translation")?,
                rotation(*rotation_deg, "collider rotation")?,
            ),
            Motion::Keyframes(keys) => {
                if keys.iter().any(|k| !k.0.is_finite()) {
                    return Err(format!("collider {k}: a keyframe time is not finite").into());
                }
                keyframe_pose(keys, 0.0)?
            }
        };
        let e = world
            .spawn((
                BonePose(pose),
                BoneCollider {
                    shape: c.shape,
                    offset: Pose::IDENTITY,
                },
            ))
            .id();
        if let Motion::Keyframes(keys) = &c.motion {
            keyed.push((e, keys.clone()));
        }
    }
    let nodes = cloth.positions().len();
    let mut entity = world.spawn(ClothRenderMesh::default());
    if let (Some(spec), Some(_)) = (&s.character, &rig)
        && spec.attach_pins
    {
        let bindings = rig::shoulder_bindings(cloth.positions(), cloth.pins(), &poses[0]);
        let settings = AttachmentSettings {
            linear_inertia: spec.linear_inertia,
            angular_inertia: spec.angular_inertia,
            ..Default::default()
        };
        let attachments = Attachments::bind(&cloth, &bindings, &poses, 0, settings)
            .map_err(|e| format!("attachments: {e}"))?;
        entity.insert(ClothAttachments {
            bones: bone_entities.clone(),
            attachments,
            last_error: None,
        });
    }
    let cloth_entity = entity.insert(ClothSim::new(cloth)).id();
    Ok(LoadedScenario {
        name: s.name,
        frames: s.frames,
        world,
        schedule,
        rig,
        poses,
        bone_entities,
        keyed,
        cloth_entity,
        nodes,
    })
}

impl LoadedScenario {
    /// The scenario's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Frames the scenario runs.
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// Runs at most `frames` frames instead of the file's count (at least one).
    pub fn truncate_frames(&mut self, frames: u32) {
        self.frames = self.frames.min(frames.max(1));
    }

    /// Whether the scenario has the built-in character.
    pub fn has_character(&self) -> bool {
        self.rig.is_some()
    }

    /// Runs every frame, writing an OBJ per frame under `obj_dir` if given. Returns the name,
    /// whether there is a character, and what was measured.
    pub fn run(self, obj_dir: Option<&Path>) -> Result<(String, bool, Summary), ScenarioError> {
        let LoadedScenario {
            name,
            frames,
            mut world,
            mut schedule,
            mut rig,
            mut poses,
            bone_entities,
            keyed,
            cloth_entity,
            nodes,
        } = self;

        if let Some(dir) = obj_dir {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let mut sum = Summary {
            frames,
            nodes,
            times: Vec::with_capacity(frames as usize),
            max_strain: 0.0,
            mean_strain: 0.0,
            max_penetration_m: 0.0,
            conformity_residual: 0.0,
            nan_frames: 0,
            iterations: 0,
        };
        for frame in 0..frames {
            let t = (frame + 1) as f64 / 60.0;
            if let Some(r) = &mut rig {
                r.advance(1.0 / 60.0);
                r.poses(&mut poses);
                for (b, &e) in bone_entities.iter().enumerate() {
                    world.get_mut::<BonePose>(e).ok_or("bone vanished")?.0 = poses[b];
                }
            }
            for (e, keys) in &keyed {
                let pose = keyframe_pose(keys, t)?;
                world.get_mut::<BonePose>(*e).ok_or("collider vanished")?.0 = pose;
            }
            let start = Instant::now();
            schedule.run(&mut world);
            sum.times.push(start.elapsed().as_secs_f64() * 1e3);
            let sim = world
                .get::<ClothSim>(cloth_entity)
                .ok_or("cloth vanished")?;
            if let Some(e) = &sim.last_error {
                return Err(format!("frame {frame}: {e}").into());
            }
            sum.iterations = sim.last_step.iterations;
            if sim.cloth.positions().iter().any(|p| !p.is_finite()) {
                sum.nan_frames += 1;
                continue;
            }
            let m = sim.cloth.measures();
            sum.max_strain = sum.max_strain.max(m.max_strain);
            sum.mean_strain = sum.mean_strain.max(m.mean_strain);
            sum.conformity_residual = sum.conformity_residual.max(m.conformity_residual);
            let pen = world.resource::<ClothColliders>().set.max_penetration(
                sim.cloth.positions(),
                sim.cloth.contact_settings().thickness,
            );
            sum.max_penetration_m = sum.max_penetration_m.max(pen);
            if let Some(dir) = obj_dir {
                let mesh = world
                    .get::<ClothRenderMesh>(cloth_entity)
                    .ok_or("mesh vanished")?;
                write_obj(&dir.join(format!("{name}_{frame:05}.obj")), mesh)?;
            }
        }
        let has_character = rig.is_some();
        Ok((name, has_character, sum))
    }
}

fn write_obj(path: &Path, mesh: &ClothRenderMesh) -> Fallible<()> {
    use std::fmt::Write;
    let mut out = String::new();
    for p in &mesh.positions {
        let _ = writeln!(out, "v {} {} {}", p.x, p.y, p.z);
    }
    for n in &mesh.normals {
        let _ = writeln!(out, "vn {} {} {}", n.x, n.y, n.z);
    }
    for t in mesh.indices.chunks_exact(3) {
        let [a, b, c] = [t[0] + 1, t[1] + 1, t[2] + 1];
        let _ = writeln!(out, "f {a}//{a} {b}//{b} {c}//{c}");
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()).into())
}
