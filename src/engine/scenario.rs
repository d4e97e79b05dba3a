//! Scenario files (RON) for tuning budgets per platform, run headless through the ECS layer.
//!
//! A scenario names a base mesh (an OBJ file, or a generated rectangle or disc), where it is
//! placed, which vertices are pinned (indices or a box), the material, the budget preset,
//! colliders with their motion (static, keyframed, or the built-in character of [`crate::rig`];
//! a collider's `shape` by its parameters, or `obj: (path: "...", convex: false, scale: 1.0)`
//! for a triangle mesh or convex hull read from an OBJ file; `groups: (memberships: [2],
//! filter: [1, 2])` for its collision groups, also on `character`, the cloth's own in
//! `contact: (groups: ...)`, see [`crate::CollisionGroups`]),
//! whether pins follow the character's chest and clavicles, gravity, wind, contact settings,
//! game constraints (`limits`, [`crate::LimitSettings`]), self-collision (`self_collision`,
//! [`crate::SelfCollisionSettings`]), cloths layered over the scenario's cloth (`layers:
//! Some((settings: (thickness: 0.005, friction: 0.3), cloths: [(mesh: ..., placement: ...,
//! pins: ..., material: ..., attach_pins: false)]))`, [`crate::layers`]: the scenario's cloth
//! is the inner layer, the listed ones follow outward; each takes the scenario's budget,
//! contact, wind, self-collision and scalar game constraints) and the frame count. See
//! `scenarios/*.ron` and the `scenario` example.
//!
//! A malformed or hostile file gives one [`ScenarioError`] naming the problem: sizes,
//! coordinates and frame counts are capped so a file cannot make the runner hang or exhaust
//! memory. Every struct and enum variant refuses fields it does not know. Values are checked
//! as they are read, so that syntax errors, unknown fields and out-of-range values alike give
//! the line and column of the value and its path of fields (`banner.ron:6:24:
//! pins.Box.max: ...`); what can only be checked once the mesh is built (a pinned vertex that
//! does not exist) names the path of fields, and an OBJ mesh's own problems name the face and
//! the line of the OBJ file (see [`crate::obj`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bevy_ecs::prelude::*;
use glam::{DQuat, DVec3, Vec3};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use thiserror::Error;

use crate::aero::Aerodynamics;
use crate::attachment::{AttachmentSettings, Attachments};
use crate::cloth::Cloth;
use crate::collision::{
    ColliderError, ColliderShape, CollisionGroups, ContactSettings, ConvexHull, Pose, TriangleMesh,
};
use crate::ecs::{
    BoneCollider, BonePose, BudgetPreset, ClothAttachments, ClothColliders, ClothCollisionGroups,
    ClothConfig, ClothConfigOverride, ClothLayer, ClothLayering, ClothRenderMesh, ClothSim,
    add_cloth_systems, init_cloth_resources, spawn_character_bones,
};
use crate::energy::Material;
use crate::error::RonError;
use crate::layers::{LayerSettings, layer_crossings, layer_separation};
use crate::limits::LimitSettings;
use crate::load::{Validate, checked, count, positive, read_if, tuple, vector};
use crate::mesh::{BaseMesh, ClothMesh};
use crate::model::SolverSettings;
use crate::obj::{ObjMesh, ObjOptions};
use crate::rig::{self, Animation, CharacterRig};
use crate::self_contact::SelfCollisionSettings;

/// Why a scenario could not run: one line naming the problem and, where known, where it is.
/// Displayed as `FILE:LINE:COLUMN: PATH: MESSAGE`, leaving out what is not known.
#[derive(Debug, Clone, PartialEq, Default, Error)]
#[error("{}", self.render())]
pub struct ScenarioError {
    /// The scenario file, when the scenario was read from one.
    pub file: Option<String>,
    /// Line and column (from 1) of the value at fault, when the format gives them.
    pub position: Option<(usize, usize)>,
    /// Path of fields to the value at fault (`colliders[2].shape.Sphere.radius`), when known.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl ScenarioError {
    /// An error about the value at `path` (a path of fields in the scenario file).
    pub fn at(path: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self {
            path: path.into(),
            message: message.to_string(),
            ..Default::default()
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        match (&self.file, self.position) {
            (Some(f), Some((l, c))) => out.push_str(&format!("{f}:{l}:{c}: ")),
            (Some(f), None) => out.push_str(&format!("{f}: ")),
            (None, Some((l, c))) => out.push_str(&format!("{l}:{c}: ")),
            (None, None) => {}
        }
        if !self.path.is_empty() {
            out.push_str(&self.path);
            out.push_str(": ");
        }
        out.push_str(&self.message);
        out
    }

    /// The same error, naming `file` as where it is (for text read from that file and given to
    /// [`load`]).
    pub fn in_file(mut self, file: &Path) -> Self {
        self.file = Some(file.display().to_string());
        self
    }
}

impl From<RonError> for ScenarioError {
    fn from(e: RonError) -> Self {
        Self {
            file: None,
            position: Some((e.line, e.column)),
            path: e.path,
            message: e.message,
        }
    }
}

impl From<String> for ScenarioError {
    fn from(s: String) -> Self {
        Self::at("", s)
    }
}

impl From<&str> for ScenarioError {
    fn from(s: &str) -> Self {
        Self::at("", s)
    }
}

/// Most frames a scenario may run (about 28 minutes at 60 Hz).
const MAX_FRAMES: u32 = 100_000;
/// Most base-mesh cells along one side of a generated mesh.
const MAX_CELLS: u32 = 512;
/// Most nodes of a subdivided scenario mesh.
const MAX_NODES: usize = 40_000;
/// Largest coordinate, size or speed accepted anywhere (metres, m/s, degrees).
const MAX_SIZE: u32 = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    name: String,
    mesh: MeshSource,
    #[serde(default)]
    placement: Placement,
    #[serde(default)]
    pins: Pins,
    #[serde(default, deserialize_with = "checked")]
    material: Material,
    #[serde(default)]
    budget: Budget,
    #[serde(default)]
    colliders: Vec<ColliderSpec>,
    #[serde(default)]
    character: Option<CharacterSpec>,
    #[serde(
        default = "default_gravity",
        deserialize_with = "vector::<_, MAX_SIZE>"
    )]
    gravity: DVec3,
    #[serde(default, deserialize_with = "wind")]
    wind: Option<DVec3>,
    #[serde(default, deserialize_with = "checked")]
    contact: ContactSettings,
    /// Game constraints and sleeping (per-node arrays in node order).
    #[serde(default, deserialize_with = "checked")]
    limits: LimitSettings,
    /// The cloth against itself (default: off).
    #[serde(default, deserialize_with = "checked")]
    self_collision: SelfCollisionSettings,
    /// Cloths layered over the scenario's cloth (default: none).
    #[serde(default)]
    layers: Option<LayersSpec>,
    /// Frames run.
    #[serde(deserialize_with = "count::<_, 1, MAX_FRAMES>")]
    frames: u32,
}

fn default_gravity() -> DVec3 {
    DVec3::new(0.0, -9.81, 0.0)
}

/// `Some((x, y, z))` in m/s, checked as [`Aerodynamics::cloth`] will use it.
fn wind<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DVec3>, D::Error> {
    let w = Option::<DVec3>::deserialize(d)?;
    if let Some(w) = w {
        Aerodynamics::cloth(w).check().map_err(D::Error::custom)?;
    }
    Ok(w)
}

/// Most cloths layered over a scenario's cloth.
const MAX_LAYERS: usize = 8;

/// Cloths layered over the scenario's cloth ([`crate::layers`]): the scenario's cloth is the
/// inner layer, the listed cloths follow it outward in order; every two whose collision groups
/// meet keep `settings.thickness` apart.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LayersSpec {
    /// Thickness and friction between the layers (default [`LayerSettings::default`]).
    #[serde(default, deserialize_with = "checked")]
    settings: LayerSettings,
    /// The layered cloths (1 to [`MAX_LAYERS`]), inner first.
    #[serde(deserialize_with = "layer_cloths")]
    cloths: Vec<LayerCloth>,
}

/// One layered cloth: its mesh, placement, pins and material as the scenario's own; its
/// budget, contact, wind, self-collision and the scalar game constraints are the scenario's
/// (per-node constraint arrays belong to the scenario's cloth and are left out). Its fields
/// repeat the scenario's: serde's `deny_unknown_fields` does not combine with `flatten`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LayerCloth {
    mesh: MeshSource,
    #[serde(default)]
    placement: Placement,
    #[serde(default)]
    pins: Pins,
    #[serde(default, deserialize_with = "checked")]
    material: Material,
    /// Pins follow the character's chest and clavicles, as the scenario's cloth's do with
    /// `character.attach_pins` (default `false`; needs `character`).
    #[serde(default)]
    attach_pins: bool,
}

fn layer_cloths<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<LayerCloth>, D::Error> {
    let cloths = Vec::<LayerCloth>::deserialize(d)?;
    if cloths.is_empty() || cloths.len() > MAX_LAYERS {
        return Err(D::Error::custom(format!(
            "give 1 to {MAX_LAYERS} layered cloths, got {}",
            cloths.len()
        )));
    }
    Ok(cloths)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
enum MeshSource {
    /// `width` x `height` m in the x-y plane (y up), `cells_x` x `cells_y` base cells.
    Rectangle {
        #[serde(deserialize_with = "positive::<_, MAX_SIZE>")]
        width: f64,
        #[serde(deserialize_with = "positive::<_, MAX_SIZE>")]
        height: f64,
        #[serde(deserialize_with = "count::<_, 1, MAX_CELLS>")]
        cells_x: u32,
        #[serde(deserialize_with = "count::<_, 1, MAX_CELLS>")]
        cells_y: u32,
    },
    /// A disc of `radius` in the x-z plane, `rings` rings of `segments` triangles.
    Disc {
        #[serde(deserialize_with = "positive::<_, MAX_SIZE>")]
        radius: f64,
        #[serde(deserialize_with = "count::<_, 1, MAX_CELLS>")]
        rings: u32,
        #[serde(deserialize_with = "count::<_, 3, MAX_CELLS>")]
        segments: u32,
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
    #[serde(default, deserialize_with = "vector::<_, MAX_SIZE>")]
    translation: DVec3,
    /// Rotation about x, y, z in degrees (applied in that order).
    #[serde(default, deserialize_with = "vector::<_, MAX_SIZE>")]
    rotation_deg: DVec3,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
enum Pins {
    #[default]
    None,
    /// Base-mesh vertex indices.
    Vertices(Vec<u32>),
    /// Every base vertex inside this box after placement (and the edges between them); it must
    /// hold at least one.
    Box {
        #[serde(deserialize_with = "vector::<_, MAX_SIZE>")]
        min: DVec3,
        #[serde(deserialize_with = "vector::<_, MAX_SIZE>")]
        max: DVec3,
    },
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
enum Budget {
    Mobile,
    #[default]
    Console,
    Desktop,
    Custom(BudgetPreset),
}

/// A collider: its shape, given by its parameters (`shape`) or read from an OBJ file (`obj`),
/// one of the two, and its motion.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ColliderSpec {
    #[serde(default, deserialize_with = "some_checked")]
    shape: Option<ColliderShape>,
    #[serde(default, deserialize_with = "some")]
    obj: Option<ObjCollider>,
    motion: Motion,
    /// The body's collision groups (lists of group numbers 1 to 32; default: all).
    #[serde(default)]
    groups: CollisionGroups,
}

/// A collider read from an OBJ file (path relative to the scenario file) by the rules of
/// [`crate::obj`], in the body's frame: a triangle mesh (solid if closed), or the convex hull
/// of its vertices with `convex: true`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjCollider {
    path: String,
    /// The convex hull of the vertices instead of the triangles (default `false`).
    #[serde(default)]
    convex: bool,
    /// Scale from OBJ units to metres (default 1; 0.01 for a file in centimetres).
    #[serde(default = "one", deserialize_with = "positive::<_, MAX_SIZE>")]
    scale: f64,
}

/// A field written as a bare value (no `Some(...)`) that may be left out.
fn some<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// [`some`] for a value checked as it is read.
fn some_checked<'de, D: Deserializer<'de>, T: Deserialize<'de> + Validate>(
    d: D,
) -> Result<Option<T>, D::Error> {
    checked(d).map(Some)
}

/// The shape of collider `k`: its `shape`, or the mesh or hull of its `obj` file.
fn collider_shape(k: usize, c: &ColliderSpec, dir: &Path) -> Fallible<ColliderShape> {
    let path = format!("colliders[{k}]");
    match (&c.shape, &c.obj) {
        (Some(shape), None) => Ok(shape.clone()),
        (None, Some(obj)) => {
            obj_collider(obj, dir).map_err(|e| ScenarioError::at(path + ".obj", e))
        }
        _ => Err(ScenarioError::at(
            path,
            "give exactly one of `shape` (by its parameters) and `obj` (a mesh file)",
        )),
    }
}

/// Reads an [`ObjCollider`]'s file into a triangle-mesh or convex-hull shape; errors name the
/// file and, for a bad triangle or vertex, its line in the file.
fn obj_collider(spec: &ObjCollider, dir: &Path) -> Result<ColliderShape, String> {
    let file = dir.join(&spec.path);
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", file.display());
    let reader = std::fs::File::open(&file).map_err(|e| at(&e))?;
    let obj = ObjMesh::read(&mut std::io::BufReader::new(reader), &ObjOptions::default())
        .map_err(|e| at(&e))?;
    let vertices: Vec<DVec3> = obj
        .base
        .positions
        .iter()
        .map(|p| p.as_dvec3() * spec.scale)
        .collect();
    let line_of_vertex = |v: usize| {
        obj.vertex_sources
            .get(v)
            .and_then(|&s| obj.vertex_lines.get(s as usize))
    };
    let line_of_triangle = |t: usize| {
        obj.triangle_faces
            .get(t)
            .and_then(|&f| obj.face_lines.get(f as usize))
    };
    let shape = if spec.convex {
        ConvexHull::new(vertices).map(|h| ColliderShape::ConvexHull(Arc::new(h)))
    } else {
        TriangleMesh::new(vertices, obj.base.triangles.clone())
            .map(|m| ColliderShape::TriMesh(Arc::new(m)))
    };
    shape.map_err(|e| {
        let line = match e {
            ColliderError::BadVertex { index, .. } => line_of_vertex(index),
            ColliderError::BadIndex { triangle, .. }
            | ColliderError::DegenerateTriangle { triangle } => line_of_triangle(triangle),
            _ => None,
        };
        match line {
            Some(line) => at(&format!("line {line}: {e}")),
            None => at(&e),
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
enum Motion {
    Static {
        #[serde(deserialize_with = "vector::<_, MAX_SIZE>")]
        translation: DVec3,
        #[serde(default, deserialize_with = "vector::<_, MAX_SIZE>")]
        rotation_deg: DVec3,
    },
    /// (time in s, translation, rotation in degrees), times finite and non-decreasing, linear
    /// between keys, held after the last.
    Keyframes(#[serde(deserialize_with = "keyframes")] Vec<Keyframe>),
}

/// (time in s, translation in m, rotation about x, y, z in degrees).
#[derive(Deserialize, Clone, Copy)]
struct Keyframe(
    #[serde(deserialize_with = "time")] f64,
    #[serde(deserialize_with = "vector::<_, MAX_SIZE>")] DVec3,
    #[serde(deserialize_with = "vector::<_, MAX_SIZE>")] DVec3,
);

fn time<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    read_if(
        d,
        |t: &f64| t.is_finite() && t.abs() <= f64::from(MAX_FRAMES),
        |t| format!("a keyframe time must be finite and at most {MAX_FRAMES} s, got {t:?}"),
    )
}

fn keyframes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Keyframe>, D::Error> {
    let keys = Vec::<Keyframe>::deserialize(d)?;
    if keys.is_empty() {
        return Err(D::Error::custom("keyframes: empty list"));
    }
    if let Some(k) = keys.windows(2).position(|w| w[1].0 < w[0].0) {
        return Err(D::Error::custom(format!(
            "keyframe {} at {} s comes before keyframe {} at {} s: times must not decrease",
            k + 1,
            keys[k + 1].0,
            k,
            keys[k].0
        )));
    }
    Ok(keys)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CharacterSpec {
    #[serde(deserialize_with = "checked")]
    animation: Animation,
    /// Pins follow the chest and clavicles (skinned), as a cape would.
    #[serde(default)]
    attach_pins: bool,
    #[serde(default = "one", deserialize_with = "unit")]
    linear_inertia: f64,
    #[serde(default = "one", deserialize_with = "unit")]
    angular_inertia: f64,
    /// The character's bodies' collision groups (default: all).
    #[serde(default)]
    groups: CollisionGroups,
}

impl Validate for Animation {
    fn check(&self) -> Result<(), String> {
        match *self {
            Animation::Spin { rate } if !(rate.is_finite() && rate.abs() <= 100.0) => Err(format!(
                "a spin rate must be finite and at most 100 rad/s, got {rate:?}"
            )),
            _ => Ok(()),
        }
    }
}

fn one() -> f64 {
    1.0
}

/// An inertia scale in [0, 1] (see [`AttachmentSettings`]).
fn unit<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    read_if(
        d,
        |v: &f64| v.is_finite() && (0.0..=1.0).contains(v),
        |v| format!("must be in [0, 1], got {v:?}"),
    )
}

type Fallible<T> = Result<T, ScenarioError>;

fn rotation(deg: DVec3) -> DQuat {
    DQuat::from_rotation_z(deg.z.to_radians())
        * DQuat::from_rotation_y(deg.y.to_radians())
        * DQuat::from_rotation_x(deg.x.to_radians())
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

/// Reads a base mesh from OBJ text by the rules of [`crate::obj`] (all objects merged, polygons
/// triangulated in their plane, vertices at one position merged, materials ignored). The mesh
/// itself is checked by [`ClothMesh::new`].
pub fn obj_mesh(reader: &mut impl std::io::BufRead) -> Result<BaseMesh, ScenarioError> {
    ObjMesh::read(reader, &ObjOptions::default())
        .map(|m| m.base)
        .map_err(|e| e.to_string().into())
}

/// A cloth's base mesh, placed, and the OBJ it came from (to locate mesh errors in it); errors
/// name `at` (the cloth's path of fields, empty for the scenario's own) before `mesh`.
fn base_mesh(
    mesh: &MeshSource,
    placement: &Placement,
    dir: &Path,
    at: &str,
) -> Fallible<(BaseMesh, Option<ObjMesh>)> {
    let (base, obj) = match mesh {
        MeshSource::Rectangle {
            width,
            height,
            cells_x,
            cells_y,
        } => (
            BaseMesh::rectangle(
                *width as f32,
                *height as f32,
                *cells_x as usize,
                *cells_y as usize,
            )
            .map_err(|e| ScenarioError::at(format!("{at}mesh.Rectangle"), e))?,
            None,
        ),
        MeshSource::Disc {
            radius,
            rings,
            segments,
        } => (
            disc(*radius as f32, *rings as usize, *segments as usize),
            None,
        ),
        MeshSource::Obj { path, keep_open } => {
            let file = dir.join(path);
            let fail = |e: &dyn std::fmt::Display| {
                ScenarioError::at(format!("{at}mesh.Obj"), format!("{}: {e}", file.display()))
            };
            let reader = std::fs::File::open(&file).map_err(|e| fail(&e))?;
            let options = ObjOptions {
                keep_open: keep_open.clone(),
            };
            let obj = ObjMesh::read(&mut std::io::BufReader::new(reader), &options)
                .map_err(|e| fail(&e))?;
            (obj.base.clone(), Some(obj))
        }
    };
    let place = Pose::new(placement.translation, rotation(placement.rotation_deg));
    let placed = base.map_positions(|p| place.transform_point(p.as_dvec3()).as_vec3());
    Ok((placed, obj))
}

/// The base vertices `pins` names on `base`; errors name `at` before `pins`.
fn pinned_vertices(pins: &Pins, base: &BaseMesh, at: &str) -> Fallible<Vec<u32>> {
    let count = base.positions.len();
    match pins {
        Pins::None => Ok(Vec::new()),
        Pins::Vertices(v) => {
            if let Some(k) = v.iter().position(|&i| i as usize >= count) {
                return Err(ScenarioError::at(
                    format!("{at}pins.Vertices[{k}]"),
                    format!(
                        "vertex {} does not exist (the mesh has {count} vertices)",
                        v[k]
                    ),
                ));
            }
            Ok(v.clone())
        }
        Pins::Box { min, max } => {
            let inside: Vec<u32> = (0..count as u32)
                .filter(|&i| {
                    let p = base.positions[i as usize].as_dvec3();
                    p.cmpge(*min).all() && p.cmple(*max).all()
                })
                .collect();
            if inside.is_empty() {
                let lo = base.positions.iter().fold(Vec3::INFINITY, |a, &p| a.min(p));
                let hi = base
                    .positions
                    .iter()
                    .fold(-Vec3::INFINITY, |a, &p| a.max(p));
                return Err(ScenarioError::at(
                    format!("{at}pins.Box"),
                    format!(
                        "no vertex lies in the box from {} to {} (the placed mesh spans {} to {})",
                        tuple(*min),
                        tuple(*max),
                        tuple(lo.as_dvec3()),
                        tuple(hi.as_dvec3())
                    ),
                ));
            }
            Ok(inside)
        }
    }
}

/// What [`build_cloth`] builds a cloth from: the scenario's own cloth's fields, or a layer's.
struct ClothSpec<'a> {
    mesh: &'a MeshSource,
    placement: &'a Placement,
    pins: &'a Pins,
    material: Material,
    attach_pins: bool,
}

/// A cloth from `spec` at `settings`, its start moved by a variation's `seed` (0: not moved).
/// Errors name `at` (the cloth's path of fields, empty for the scenario's own) before the
/// field.
fn build_cloth(
    spec: &ClothSpec<'_>,
    at: &str,
    dir: &Path,
    settings: &SolverSettings,
    seed: u64,
) -> Fallible<Cloth> {
    let (base, obj) = base_mesh(spec.mesh, spec.placement, dir, at)?;
    let pinned = pinned_vertices(spec.pins, &base, at)?;
    if spec.attach_pins && pinned.is_empty() {
        return Err(ScenarioError::at(
            if at.is_empty() {
                "character.attach_pins".to_string()
            } else {
                format!("{at}attach_pins")
            },
            "needs pinned vertices (pins is empty)",
        ));
    }
    // Every edge borders at most two triangles, so subdivision gives at least V + 3T/2 nodes:
    // refuse an oversized mesh before building it.
    let at_least = base.positions.len() + 3 * base.triangles.len() / 2;
    if at_least > MAX_NODES {
        return Err(ScenarioError::at(
            format!("{at}mesh"),
            format!("at least {at_least} nodes after subdivision, at most {MAX_NODES}"),
        ));
    }
    let mesh = ClothMesh::new(&base).map_err(|e| match &obj {
        Some(obj) => ScenarioError::at(format!("{at}mesh.Obj"), obj.describe(&e)),
        None => ScenarioError::at(format!("{at}mesh"), e),
    })?;
    if mesh.node_count() > MAX_NODES {
        return Err(ScenarioError::at(
            format!("{at}mesh"),
            format!(
                "{} nodes after subdivision, at most {MAX_NODES}",
                mesh.node_count()
            ),
        ));
    }
    let pins = mesh.nodes_for_vertices(&pinned, true);
    let mut cloth = Cloth::from_mesh(mesh, spec.material, &pins, *settings)
        .map_err(|e| ScenarioError::at(format!("{at}material"), e))?;
    if seed != 0 {
        let moved = jittered(cloth.positions(), seed, 1e-9);
        cloth
            .set_positions(&moved)
            .map_err(|e| ScenarioError::at("variation", e))?;
    }
    Ok(cloth)
}

fn keyframe_pose(keys: &[Keyframe], t: f64) -> Pose {
    let pose = |k: &Keyframe| Pose::new(k.1, rotation(k.2));
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return Pose::IDENTITY;
    };
    if t <= first.0 {
        return pose(first);
    }
    for w in keys.windows(2) {
        if t <= w[1].0 {
            let s = (t - w[0].0) / (w[1].0 - w[0].0).max(1e-9);
            return pose(&w[0]).interpolate(&pose(&w[1]), s);
        }
    }
    pose(last)
}

/// What a scenario run measured.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Frames run.
    pub frames: u32,
    /// Cloth nodes (of every cloth, layered ones included).
    pub nodes: usize,
    /// Wall time of each tick, ms.
    pub times: Vec<f64>,
    /// Work of each tick, every cloth's ([`crate::StepCounters::work`]).
    pub work: Vec<f64>,
    /// Ticks in which a bound stopped a stage of some cloth short
    /// ([`crate::StepCounters::degraded`]).
    pub degraded_frames: u32,
    /// Worst max render-mesh strain over the frames (and the cloths).
    pub max_strain: f64,
    /// Worst mean strain over the frames.
    pub mean_strain: f64,
    /// Worst strain of the edges with both ends pinned (left out of `max_strain`: the pins'
    /// stretch, see [`crate::Measures::pinned_max_strain`]).
    pub pinned_max_strain: f64,
    /// Deepest node inside a body's thickness layer, m.
    pub max_penetration_m: f64,
    /// Worst conformity residual.
    pub conformity_residual: f64,
    /// Frames with a non-finite position.
    pub nan_frames: u32,
    /// Iterations per tick.
    pub iterations: u32,
    /// The cloth's centre of mass after each frame (m).
    pub centre_of_mass: Vec<DVec3>,
    /// Times the cloth went back to its last good state after a non-finite step (rollbacks).
    pub recoveries: u64,
    /// Per cloth, its worst max render-mesh strain over the frames: the scenario's cloth, then
    /// its layered cloths inner first. `max_strain` is the worst of them.
    pub cloth_max_strain: Vec<f64>,
    /// Pairs of layered cloths' triangles that intersect ([`crate::layers::layer_crossings`]),
    /// summed over every pair of cloths and every frame (0 without layers).
    pub crossings: u64,
    /// Frames with a crossing.
    pub crossing_frames: u32,
    /// The least distance between two layered cloths over the frames, within 5 cm
    /// ([`crate::layers::layer_separation`]; infinite without layers or farther apart).
    pub min_separation_m: f64,
}

impl Summary {
    /// The median, 99th percentile and maximum of the ticks' work and wall time.
    pub fn costs(&self) -> crate::counters::CostSummary {
        let mut c = crate::counters::FrameCosts::with_capacity(self.times.len());
        for (&w, &ms) in self.work.iter().zip(&self.times) {
            c.record(w, ms);
        }
        c.summary()
    }
}

/// Reads, validates and runs the scenario file at `path` headless through the ECS layer,
/// writing an OBJ per frame under `obj_dir` if given. Returns the scenario's name and what was
/// measured, or one error naming the problem; it never panics on bad input and caps sizes and
/// frame counts so that it cannot hang.
pub fn run(path: &Path, obj_dir: Option<&Path>) -> Result<(String, bool, Summary), ScenarioError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError::from(e.to_string()).in_file(path))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let loaded = load(&text, dir).map_err(|e| e.in_file(path))?;
    loaded.run(obj_dir)
}

/// A variation of a scenario: one member of the family around it that `tune` judges a budget
/// on, so that a budget chosen on one scene holds on scenes of its kind. Default: the scenario
/// as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variation {
    /// Scale of every body's thickness: capsule, tapered-capsule, cylinder and sphere radii and
    /// a box's half extents (a capsule's length stays). Default 1.
    pub size: f64,
    /// Scale of every keyframed body's speed (its key times are divided by it; a static body
    /// stays). Default 1.
    pub speed: f64,
    /// Scale of the wind. Default 1.
    pub wind: f64,
    /// Seed of a start moved by up to 1e-9 m per coordinate (0: not moved). Default 0.
    pub seed: u64,
}

impl Default for Variation {
    fn default() -> Self {
        Self {
            size: 1.0,
            speed: 1.0,
            wind: 1.0,
            seed: 0,
        }
    }
}

impl Variation {
    /// The family `tune` judges a check on: the check as written at seeds 0, 1 and 2, then its
    /// bodies a third thinner and thicker, a third slower and faster, and (where it has wind)
    /// its wind a third weaker and stronger: 7 or 9 members.
    pub fn family(has_wind: bool) -> Vec<Variation> {
        let base = Variation::default();
        let mut out: Vec<Variation> = (0..3).map(|seed| Variation { seed, ..base }).collect();
        for f in [2.0 / 3.0, 4.0 / 3.0] {
            out.push(Variation { size: f, ..base });
            out.push(Variation { speed: f, ..base });
            if has_wind {
                out.push(Variation { wind: f, ..base });
            }
        }
        out
    }

    /// A short name: `seed 1`, `size 0.67`, `speed 1.33`, `wind 0.67`, or `as written`.
    pub fn label(&self) -> String {
        if self.size != 1.0 {
            format!("size {:.2}", self.size)
        } else if self.speed != 1.0 {
            format!("speed {:.2}", self.speed)
        } else if self.wind != 1.0 {
            format!("wind {:.2}", self.wind)
        } else if self.seed != 0 {
            format!("seed {}", self.seed)
        } else {
            "as written".into()
        }
    }

    /// `shape` with its thickness scaled by [`Variation::size`].
    fn shape(&self, shape: ColliderShape) -> ColliderShape {
        let k = self.size;
        match shape {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => ColliderShape::Capsule {
                half_height,
                radius: radius * k,
            },
            ColliderShape::Sphere { radius } => ColliderShape::Sphere { radius: radius * k },
            ColliderShape::Cylinder {
                half_height,
                radius,
            } => ColliderShape::Cylinder {
                half_height,
                radius: radius * k,
            },
            ColliderShape::TaperedCapsule {
                half_height,
                bottom_radius,
                top_radius,
            } => ColliderShape::TaperedCapsule {
                half_height,
                bottom_radius: bottom_radius * k,
                top_radius: top_radius * k,
            },
            ColliderShape::Cuboid { half_extents } => ColliderShape::Cuboid {
                half_extents: half_extents * k,
            },
            other => other,
        }
    }
}

/// `positions` each moved by up to `amount` per coordinate, deterministically from `seed`
/// (splitmix64).
fn jittered(positions: &[DVec3], seed: u64, amount: f64) -> Vec<DVec3> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    positions
        .iter()
        .map(|p| *p + DVec3::new(next(), next(), next()) * amount)
        .collect()
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
    /// The layered cloths' entities, inner first (empty without `layers`).
    layer_entities: Vec<Entity>,
    nodes: usize,
    has_wind: bool,
}

/// Parses and validates scenario text and builds its world (mesh, factorisation, colliders,
/// character) without running a frame. OBJ paths are relative to `dir`. Every problem is one
/// [`ScenarioError`]; text over 16 MiB, meshes over 40,000 nodes and more than 100,000 frames
/// are refused.
pub fn load(text: &str, dir: &Path) -> Result<LoadedScenario, ScenarioError> {
    load_varied(text, dir, &Variation::default())
}

/// [`load`] with a [`Variation`] applied: bodies' thickness, keyframed bodies' speed, the wind
/// and a seeded start. A variation that makes a body invalid (a radius over its shape's limits)
/// is refused like the file would be.
pub fn load_varied(
    text: &str,
    dir: &Path,
    variation: &Variation,
) -> Result<LoadedScenario, ScenarioError> {
    let valid = |x: f64| x.is_finite() && x > 0.0;
    if !(valid(variation.size) && valid(variation.speed) && variation.wind.is_finite()) {
        return Err(ScenarioError::at(
            "variation",
            format!("scales must be finite and positive, got {variation:?}"),
        ));
    }
    if text.len() > 16 << 20 {
        return Err("larger than 16 MiB".into());
    }
    let mut s: Scenario = crate::load::ron(text)?;
    s.wind = s.wind.map(|w| w * variation.wind);
    for c in &mut s.colliders {
        if let Motion::Keyframes(keys) = &mut c.motion {
            for k in keys {
                k.0 /= variation.speed;
            }
        }
    }
    let shapes = s
        .colliders
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let shape = variation.shape(collider_shape(k, c, dir)?);
            shape
                .validate()
                .map_err(|e| ScenarioError::at(format!("colliders[{k}].shape"), e))?;
            Ok(shape)
        })
        .collect::<Fallible<Vec<_>>>()?;
    let budget = match &s.budget {
        Budget::Mobile => BudgetPreset::mobile(),
        Budget::Console => BudgetPreset::console(),
        Budget::Desktop => BudgetPreset::desktop(),
        Budget::Custom(p) => p.clone(),
    };
    let gravity = s.gravity;
    let settings = budget
        .settings(1.0 / 60.0, gravity)
        .map_err(|e| ScenarioError::at("budget", e))?;
    let attach = s.character.as_ref().is_some_and(|c| c.attach_pins);
    let own = ClothSpec {
        mesh: &s.mesh,
        placement: &s.placement,
        pins: &s.pins,
        material: s.material,
        attach_pins: attach,
    };
    let mut cloth = build_cloth(&own, "", dir, &settings, variation.seed)?;
    let mut layered = Vec::new();
    if let Some(spec) = &s.layers {
        for (k, c) in spec.cloths.iter().enumerate() {
            let at = format!("layers.cloths[{k}].");
            if c.attach_pins && s.character.is_none() {
                return Err(ScenarioError::at(
                    at + "attach_pins",
                    "needs `character` (there is none)",
                ));
            }
            let one = ClothSpec {
                mesh: &c.mesh,
                placement: &c.placement,
                pins: &c.pins,
                material: c.material,
                attach_pins: c.attach_pins,
            };
            let layer = build_cloth(&one, &at, dir, &settings, variation.seed)?;
            layered.push((layer, c.attach_pins));
        }
    }
    let aero = s.wind.map(Aerodynamics::cloth).unwrap_or_default();
    let config = ClothConfig {
        budget,
        gravity,
        contact: s.contact,
        aero,
        limits: s.limits,
        self_collision: s.self_collision,
        ..Default::default()
    };
    // Validate through the same setters the systems use, so errors name the setting.
    cloth
        .set_contact_settings(config.contact)
        .and_then(|_| cloth.set_aerodynamics(config.aero))
        .map_err(|e| ScenarioError::at("contact", e))?;
    cloth
        .set_limit_settings(config.limits.clone())
        .map_err(|e| ScenarioError::at("limits", e))?;
    cloth
        .set_self_collision(config.self_collision)
        .map_err(|e| ScenarioError::at("self_collision", e))?;

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
            let bones = spawn_character_bones(&mut world, &poses);
            if let Some(spec) = &s.character {
                for &b in &bones {
                    world
                        .entity_mut(b)
                        .insert(ClothCollisionGroups(spec.groups));
                }
            }
            bones
        }
        None => Vec::new(),
    };
    let mut keyed = Vec::new();
    for (c, shape) in s.colliders.iter().zip(shapes) {
        let pose = match &c.motion {
            Motion::Static {
                translation,
                rotation_deg,
            } => Pose::new(*translation, rotation(*rotation_deg)),
            Motion::Keyframes(keys) => keyframe_pose(keys, 0.0),
        };
        let e = world
            .spawn((
                BonePose(pose),
                BoneCollider {
                    shape,
                    offset: Pose::IDENTITY,
                },
                ClothCollisionGroups(c.groups),
            ))
            .id();
        if let Motion::Keyframes(keys) = &c.motion {
            keyed.push((e, keys.clone()));
        }
    }
    let nodes =
        cloth.positions().len() + layered.iter().map(|l| l.0.positions().len()).sum::<usize>();
    let attach = |cloth: &Cloth, at: &str| -> Fallible<Option<ClothAttachments>> {
        let (Some(spec), Some(_)) = (&s.character, &rig) else {
            return Ok(None);
        };
        let bindings = rig::shoulder_bindings(cloth.positions(), cloth.pins(), &poses[0]);
        let settings = AttachmentSettings {
            linear_inertia: spec.linear_inertia,
            angular_inertia: spec.angular_inertia,
            ..Default::default()
        };
        // Every node is skinned as the pins are, for max distance and backstops.
        let all: Vec<u32> = (0..cloth.positions().len() as u32).collect();
        let skin = rig::shoulder_bindings(cloth.positions(), &all, &poses[0]);
        let attachments = Attachments::bind(cloth, &bindings, &poses, 0, settings)
            .and_then(|a| a.with_skin(cloth, &skin, &poses))
            .map_err(|e| ScenarioError::at(at, e))?;
        Ok(Some(ClothAttachments {
            bones: bone_entities.clone(),
            attachments,
            last_error: None,
        }))
    };
    let own_attachments = if s.character.as_ref().is_some_and(|c| c.attach_pins) {
        attach(&cloth, "character")?
    } else {
        None
    };
    let mut layer_parts = Vec::with_capacity(layered.len());
    for (k, (layer, attach_pins)) in layered.into_iter().enumerate() {
        let attachments = if attach_pins {
            attach(&layer, &format!("layers.cloths[{k}].attach_pins"))?
        } else {
            None
        };
        layer_parts.push((layer, attachments));
    }
    let mut entity = world.spawn((ClothRenderMesh::default(), ClothSim::new(cloth)));
    if let Some(a) = own_attachments {
        entity.insert(a);
    }
    let cloth_entity = entity.id();
    let mut layer_entities = Vec::with_capacity(layer_parts.len());
    if let Some(spec) = &s.layers {
        world
            .entity_mut(cloth_entity)
            .insert(ClothLayer { order: 0 });
        world.insert_resource(ClothLayering::new(spec.settings));
        // The layered cloths take the scenario's settings but its per-node constraint arrays,
        // which are numbered by the scenario's cloth's nodes.
        let mut config = world.resource::<ClothConfig>().clone();
        config.limits.max_distance.clear();
        config.limits.backstop_distance.clear();
        config.limits.backstop_radius.clear();
        for (k, (mut layer, attachments)) in layer_parts.into_iter().enumerate() {
            layer
                .set_contact_settings(config.contact)
                .and_then(|_| layer.set_aerodynamics(config.aero))
                .and_then(|_| layer.set_limit_settings(config.limits.clone()))
                .and_then(|_| layer.set_self_collision(config.self_collision))
                .map_err(|e| ScenarioError::at(format!("layers.cloths[{k}]"), e))?;
            let mut entity = world.spawn((
                ClothRenderMesh::default(),
                ClothSim::new(layer),
                ClothLayer {
                    order: k as u32 + 1,
                },
                ClothConfigOverride(config.clone()),
            ));
            if let Some(a) = attachments {
                entity.insert(a);
            }
            layer_entities.push(entity.id());
        }
    }
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
        layer_entities,
        nodes,
        has_wind: s.wind.is_some_and(|w| w != DVec3::ZERO),
    })
}

impl LoadedScenario {
    /// Whether the scenario has wind (a family then varies it too).
    pub fn has_wind(&self) -> bool {
        self.has_wind
    }

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

    /// The cloth's size: the longest side of the box around its nodes at the start (m). The
    /// tuner divides trajectory errors by it.
    pub fn cloth_size(&self) -> f64 {
        self.world
            .get::<ClothSim>(self.cloth_entity)
            .map_or(0.0, |sim| crate::tuning::cloth_size(sim.cloth.positions()))
    }

    /// Runs the scenario at `budget` instead of the file's, every cloth (the cloths are
    /// refactored now, so that the first frame's time is a frame's).
    pub fn set_budget(&mut self, budget: BudgetPreset) -> Result<(), ScenarioError> {
        let mut config = self.world.resource_mut::<ClothConfig>();
        config.budget = budget.clone();
        let settings = config
            .budget
            .settings(config.timestep, config.gravity)
            .map_err(|e| ScenarioError::at("budget", e))?;
        for &e in std::iter::once(&self.cloth_entity).chain(&self.layer_entities) {
            if let Some(mut over) = self.world.get_mut::<ClothConfigOverride>(e) {
                over.0.budget = budget.clone();
            }
            let mut sim = self.world.get_mut::<ClothSim>(e).ok_or("cloth vanished")?;
            sim.cloth
                .set_settings(settings)
                .map_err(|e| ScenarioError::at("budget", e))?;
        }
        Ok(())
    }

    /// Runs every frame, writing an OBJ per frame under `obj_dir` if given. Returns the name,
    /// whether there is a character, and what was measured.
    pub fn run(self, obj_dir: Option<&Path>) -> Result<(String, bool, Summary), ScenarioError> {
        self.run_observed(obj_dir, |_, _| true)
    }

    /// [`LoadedScenario::run`], calling `observe(frame, cloth)` after each frame; the run stops
    /// after a frame for which it returns false (the summary then covers the frames run).
    pub fn run_observed(
        self,
        obj_dir: Option<&Path>,
        mut observe: impl FnMut(u32, &Cloth) -> bool,
    ) -> Result<(String, bool, Summary), ScenarioError> {
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
            layer_entities,
            nodes,
            has_wind: _,
        } = self;
        let cloths: Vec<Entity> = std::iter::once(cloth_entity)
            .chain(layer_entities)
            .collect();

        if let Some(dir) = obj_dir {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let mut sum = Summary {
            frames,
            nodes,
            times: Vec::with_capacity(frames as usize),
            work: Vec::with_capacity(frames as usize),
            degraded_frames: 0,
            max_strain: 0.0,
            mean_strain: 0.0,
            pinned_max_strain: 0.0,
            max_penetration_m: 0.0,
            conformity_residual: 0.0,
            nan_frames: 0,
            iterations: 0,
            centre_of_mass: Vec::with_capacity(frames as usize),
            recoveries: 0,
            cloth_max_strain: vec![0.0; cloths.len()],
            crossings: 0,
            crossing_frames: 0,
            min_separation_m: f64::INFINITY,
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
                let pose = keyframe_pose(keys, t);
                world.get_mut::<BonePose>(*e).ok_or("collider vanished")?.0 = pose;
            }
            let start = Instant::now();
            schedule.run(&mut world);
            sum.times.push(start.elapsed().as_secs_f64() * 1e3);
            let mut counters = crate::counters::StepCounters::default();
            for &e in &cloths {
                counters += world
                    .get::<ClothSim>(e)
                    .ok_or("cloth vanished")?
                    .last_step
                    .counters;
            }
            sum.work.push(counters.work());
            sum.degraded_frames += u32::from(counters.degraded());
            for (k, &entity) in cloths.iter().enumerate() {
                let sim = world.get::<ClothSim>(entity).ok_or("cloth vanished")?;
                if let Some(e) = &sim.last_error {
                    return Err(format!("frame {frame}: {e}").into());
                }
                if sim.cloth.positions().iter().any(|p| !p.is_finite()) {
                    sum.nan_frames += 1;
                    break;
                }
                let m = sim.cloth.measures();
                sum.cloth_max_strain[k] = sum.cloth_max_strain[k].max(m.max_strain);
                sum.max_strain = sum.max_strain.max(m.max_strain);
                sum.mean_strain = sum.mean_strain.max(m.mean_strain);
                sum.pinned_max_strain = sum.pinned_max_strain.max(m.pinned_max_strain);
                sum.conformity_residual = sum.conformity_residual.max(m.conformity_residual);
                // The bodies the cloth meets: one its groups let through is not penetrated.
                let contact = sim.cloth.contact_settings();
                let pen = world
                    .resource::<ClothColliders>()
                    .set
                    .max_penetration_meeting(
                        sim.cloth.positions(),
                        contact.thickness,
                        contact.groups,
                    );
                sum.max_penetration_m = sum.max_penetration_m.max(pen);
                if let Some(dir) = obj_dir {
                    let mesh = world
                        .get::<ClothRenderMesh>(entity)
                        .ok_or("mesh vanished")?;
                    let file = match k {
                        0 => format!("{name}_{frame:05}.obj"),
                        k => format!("{name}_layer{k}_{frame:05}.obj"),
                    };
                    write_obj(&dir.join(file), mesh)?;
                }
            }
            if cloths.len() > 1 {
                let crossed = crossings_and_separation(&world, &cloths, &mut sum)?;
                sum.crossings += crossed;
                sum.crossing_frames += u32::from(crossed > 0);
            }
            let sim = world
                .get::<ClothSim>(cloth_entity)
                .ok_or("cloth vanished")?;
            sum.iterations = sim.last_step.iterations;
            sum.recoveries = cloths
                .iter()
                .filter_map(|&e| world.get::<ClothSim>(e))
                .map(|s| s.cloth.recoveries())
                .sum();
            sum.centre_of_mass.push(sim.cloth.center_of_mass());
            let go_on = observe(frame, &sim.cloth);
            if !go_on {
                sum.frames = frame + 1;
                break;
            }
        }
        let has_character = rig.is_some();
        Ok((name, has_character, sum))
    }
}

/// This frame's crossings between every two of `cloths` (summed), and their least separation
/// folded into `sum`.
fn crossings_and_separation(world: &World, cloths: &[Entity], sum: &mut Summary) -> Fallible<u64> {
    let mut crossed = 0;
    for (k, &a) in cloths.iter().enumerate() {
        for &b in &cloths[k + 1..] {
            let a = &world.get::<ClothSim>(a).ok_or("cloth vanished")?.cloth;
            let b = &world.get::<ClothSim>(b).ok_or("cloth vanished")?.cloth;
            let pair = (
                (a.model().mesh().render_triangles(), a.positions()),
                (b.model().mesh().render_triangles(), b.positions()),
            );
            crossed += layer_crossings(pair.0, pair.1) as u64;
            sum.min_separation_m = sum
                .min_separation_m
                .min(layer_separation(pair.0, pair.1, 0.05));
        }
    }
    Ok(crossed)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A hanging sheet in wind with a capsule keyframed through it, for the variation tests.
    const SWEEP: &str = r#"(
        name: "sweep",
        mesh: Rectangle(width: 0.4, height: 0.4, cells_x: 4, cells_y: 4),
        pins: Box(min: (-1.0, 0.39, -1.0), max: (1.0, 0.41, 1.0)),
        wind: Some((0.0, 0.0, 3.0)),
        colliders: [
            (shape: Capsule(half_height: 0.2, radius: 0.04),
             motion: Keyframes([(0.0, (0.2, 0.2, -0.4), (0.0, 0.0, 90.0)),
                                (0.1, (0.2, 0.2, 0.4), (0.0, 0.0, 90.0))])),
        ],
        frames: 10,
    )"#;

    /// A variation scales the body's radius (not its length), divides its key times by the
    /// speed, and moves the start by at most 1e-9 m per coordinate for a seed (exactly none
    /// for seed 0); the scenario as written loads as before.
    #[test]
    fn a_variation_scales_bodies_key_times_and_moves_the_start() {
        let dir = Path::new(".");
        let plain = load(SWEEP, dir).unwrap();
        let varied = load_varied(
            SWEEP,
            dir,
            &Variation {
                size: 1.5,
                speed: 2.0,
                wind: 0.5,
                seed: 7,
            },
        )
        .unwrap();
        assert!(plain.has_wind() && varied.has_wind());
        let shape = |s: &LoadedScenario| {
            let e = s.keyed[0].0;
            s.world.get::<BoneCollider>(e).unwrap().shape.clone()
        };
        assert!(matches!(
            shape(&varied),
            ColliderShape::Capsule { half_height, radius }
                if half_height == 0.2 && (radius - 0.06).abs() < 1e-15
        ));
        assert_eq!(plain.keyed[0].1[1].0, 0.1);
        assert_eq!(varied.keyed[0].1[1].0, 0.05);
        let positions = |s: &LoadedScenario| {
            s.world
                .get::<ClothSim>(s.cloth_entity)
                .unwrap()
                .cloth
                .positions()
                .to_vec()
        };
        let (a, b) = (positions(&plain), positions(&varied));
        let moved = a
            .iter()
            .zip(&b)
            .map(|(p, q)| (*p - *q).abs().max_element())
            .fold(0.0f64, f64::max);
        assert!(moved > 0.0 && moved <= 1e-9, "moved {moved}");
        let again = load_varied(SWEEP, dir, &Variation::default()).unwrap();
        assert_eq!(positions(&again), a);
    }

    /// The family is the check at three seeds plus its bodies and speed a third either way (7
    /// members), and its wind too where it has wind (9), each member named; a scale that is
    /// not finite and positive is refused naming `variation`, and a thicker body that leaves
    /// its shape's limits is refused like the file would be.
    #[test]
    fn the_family_has_seven_or_nine_members_and_bad_scales_are_refused() {
        assert_eq!(Variation::family(false).len(), 7);
        let nine = Variation::family(true);
        assert_eq!(nine.len(), 9);
        let labels: Vec<String> = nine.iter().map(Variation::label).collect();
        assert_eq!(labels[0], "as written");
        assert!(labels.contains(&"wind 1.33".to_string()));
        let dir = Path::new(".");
        for size in [0.0, -1.0, f64::NAN] {
            let err = load_varied(
                SWEEP,
                dir,
                &Variation {
                    size,
                    ..Variation::default()
                },
            )
            .err()
            .unwrap();
            assert_eq!(err.path, "variation");
        }
        let huge = Variation {
            size: 1e9,
            ..Variation::default()
        };
        let err = load_varied(SWEEP, dir, &huge).err().unwrap();
        assert_eq!(err.path, "colliders[0].shape", "{err}");
    }
}
