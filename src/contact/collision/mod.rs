//! Kinematic bodies (a character's capsules, spheres and tapered capsules; the world's planes,
//! boxes, cylinders, convex hulls, height fields and triangle meshes) and contact inside the
//! iterations.
//!
//! This is the only module that calls parry3d. Colliders are posed by the game every frame
//! ([`ColliderSet::set_pose`] gives the pose at the *end* of the coming frame; the pose at its
//! start is the last one set), and every substep sees the pose interpolated between the two
//! (linear in translation, spherical in rotation).
//!
//! Three files, by stage: this one holds the public data (poses, shapes, the collider set, the
//! contact settings, exclusions, the forces a cloth keeps); `body` poses a collider for the
//! queries a substep makes (signed distance, surface, a node's gap along its path, the swept
//! region for the broad phase); `pass` is the contact pass of one substep (broad phase,
//! per-node forces inside the iterations, the last pass). `groups` and `shapes` hold the
//! collision groups and the shapes parry3d has no inflated form of.

mod body;
mod groups;
pub(crate) mod pass;
mod shapes;

use std::sync::Arc;

use glam::{DQuat, DVec3};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::contact::bounds::Aabb;
use body::{Body, Swept};
use pass::SLACK;

pub use groups::{CollisionGroups, GroupError};
pub use shapes::{ConvexHull, HeightField, TriangleMesh};

/// A rigid pose: rotation then translation (world = rotation * local + translation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pose {
    /// Translation in metres.
    pub translation: DVec3,
    /// Rotation (unit quaternion).
    pub rotation: DQuat,
}

impl Default for Pose {
    fn default() -> Self {
        Self::IDENTITY
    }
}

impl Pose {
    /// No rotation, no translation.
    pub const IDENTITY: Pose = Pose {
        translation: DVec3::ZERO,
        rotation: DQuat::IDENTITY,
    };

    /// A pose from a translation and a rotation.
    pub fn new(translation: DVec3, rotation: DQuat) -> Self {
        Self {
            translation,
            rotation,
        }
    }

    /// A pure translation.
    pub fn from_translation(translation: DVec3) -> Self {
        Self::new(translation, DQuat::IDENTITY)
    }

    /// Maps a local point to world space.
    #[inline]
    pub fn transform_point(&self, p: DVec3) -> DVec3 {
        self.rotation * p + self.translation
    }

    /// Maps a local direction to world space.
    #[inline]
    pub fn transform_vector(&self, v: DVec3) -> DVec3 {
        self.rotation * v
    }

    /// Maps a world point to the local frame.
    #[inline]
    pub fn inverse_transform_point(&self, p: DVec3) -> DVec3 {
        self.rotation.inverse() * (p - self.translation)
    }

    /// The inverse pose.
    pub fn inverse(&self) -> Pose {
        let r = self.rotation.inverse();
        Pose::new(-(r * self.translation), r)
    }

    /// `self` after `other`: maps through `other` first.
    pub fn mul(&self, other: &Pose) -> Pose {
        Pose::new(
            self.transform_point(other.translation),
            (self.rotation * other.rotation).normalize(),
        )
    }

    /// Interpolates to `other`: linear in translation, spherical in rotation.
    pub fn interpolate(&self, other: &Pose, s: f64) -> Pose {
        Pose::new(
            self.translation.lerp(other.translation, s),
            self.rotation.slerp(other.rotation, s),
        )
    }

    /// Whether both parts are finite and the rotation has a usable length.
    pub fn is_valid(&self) -> bool {
        self.translation.is_finite()
            && self.rotation.is_finite()
            && (self.rotation.length() - 1.0).abs() < 1e-3
    }
}

/// The shape of a kinematic body, in its local frame. The shapes holding data (hulls, meshes,
/// height fields) hold it behind an `Arc`: cloning a shape, or posing it every substep, copies
/// no vertices. In scenario files (RON) each is written by its parameters, e.g.
/// `Cuboid(half_extents: (0.6, 0.02, 0.4))`, `ConvexHull((points: [...]))`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum ColliderShape {
    /// A capsule along the local Y axis: a segment from `-half_height` to `+half_height`
    /// swept by a ball of `radius` (parry3d `Capsule`). Both in metres, both > 0.
    Capsule {
        /// Half the length of the axis segment.
        half_height: f64,
        /// Radius.
        radius: f64,
    },
    /// A ball of `radius` metres (> 0) around the local origin.
    Sphere {
        /// Radius.
        radius: f64,
    },
    /// The half-space below the local XZ plane (outward normal local +Y): ground, walls.
    Plane,
    /// A box centred on the local origin (a table top, a crate), with its half extents along
    /// local X, Y and Z (metres, > 0). Its edges and corners are rounded by the cloth thickness,
    /// as every shape is (see the `shapes` docs).
    Cuboid {
        /// Half extents along X, Y and Z.
        half_extents: DVec3,
    },
    /// A cylinder along the local Y axis from `-half_height` to `+half_height` (a pole, a
    /// rail, a barrel), flat capped.
    Cylinder {
        /// Half the length of its axis.
        half_height: f64,
        /// Radius.
        radius: f64,
    },
    /// A tapered capsule along the local Y axis (a limb: thigh, forearm): the hull of a ball of
    /// `bottom_radius` at `-half_height` and one of `top_radius` at `+half_height`. The radii
    /// may differ by less than the axis' length `2 half_height`.
    TaperedCapsule {
        /// Half the distance between the two balls' centres.
        half_height: f64,
        /// Radius of the ball at `-half_height`.
        bottom_radius: f64,
        /// Radius of the ball at `+half_height`.
        top_radius: f64,
    },
    /// The convex hull of points (a rock): see [`ConvexHull::new`].
    ConvexHull(Arc<ConvexHull>),
    /// A triangle mesh, solid if closed, a two-sided sheet if open: see [`TriangleMesh`].
    TriMesh(Arc<TriangleMesh>),
    /// Terrain: see [`HeightField`].
    HeightField(Arc<HeightField>),
}

impl ColliderShape {
    /// Checks sizes: finite, positive radius, non-degenerate capsule axis, and under 1 km (the
    /// data-holding shapes were checked when built).
    pub fn validate(&self) -> Result<(), ColliderError> {
        let size_ok = |v: f64| v.is_finite() && v > 0.0 && v < 1e3;
        match *self {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => {
                if !size_ok(radius) {
                    return Err(ColliderError::BadRadius { radius });
                }
                if !size_ok(half_height) {
                    return Err(ColliderError::DegenerateAxis { half_height });
                }
            }
            ColliderShape::Sphere { radius } => {
                if !size_ok(radius) {
                    return Err(ColliderError::BadRadius { radius });
                }
            }
            ColliderShape::Cuboid { half_extents } => shapes::check_cuboid(half_extents)?,
            ColliderShape::Cylinder {
                half_height,
                radius,
            } => shapes::check_cylinder(half_height, radius)?,
            ColliderShape::TaperedCapsule {
                half_height,
                bottom_radius,
                top_radius,
            } => shapes::check_tapered(half_height, bottom_radius, top_radius)?,
            ColliderShape::Plane
            | ColliderShape::ConvexHull(_)
            | ColliderShape::TriMesh(_)
            | ColliderShape::HeightField(_) => {}
        }
        Ok(())
    }

    /// Local bounding half-extents of the shape grown by `margin` (None for a plane).
    fn local_half_extents(&self, margin: f64) -> Option<DVec3> {
        match self {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => Some(DVec3::new(0.0, *half_height, 0.0) + DVec3::splat(radius + margin)),
            ColliderShape::Sphere { radius } => Some(DVec3::splat(radius + margin)),
            ColliderShape::Plane => None,
            other => Some(other.query(0.0)?.half_extents() + DVec3::splat(margin)),
        }
    }

    /// The query of a shape `shapes` handles, grown by `thickness` where the growth is exact
    /// (a tapered capsule's radii); None for the shapes parry3d queries directly.
    fn query(&self, thickness: f64) -> Option<shapes::Query> {
        Some(match self {
            ColliderShape::Capsule { .. } | ColliderShape::Sphere { .. } | ColliderShape::Plane => {
                return None;
            }
            ColliderShape::Cuboid { half_extents } => shapes::Query::Cuboid(*half_extents),
            ColliderShape::Cylinder {
                half_height,
                radius,
            } => shapes::Query::Cylinder(*half_height, *radius),
            ColliderShape::TaperedCapsule {
                half_height,
                bottom_radius,
                top_radius,
            } => shapes::Query::Tapered(
                *half_height,
                bottom_radius + thickness,
                top_radius + thickness,
            ),
            ColliderShape::ConvexHull(h) => shapes::Query::Hull(h.clone()),
            ColliderShape::TriMesh(m) => shapes::Query::Mesh(m.clone()),
            ColliderShape::HeightField(f) => shapes::Query::Field(f.clone()),
        })
    }
}

/// Bad collider data. Nothing is stored when one of these is returned, so a bad pose from an
/// animation never reaches the cloth.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ColliderError {
    /// A radius that is not a finite positive size under 1 km.
    #[error("collider radius must be finite, positive and under 1 km, got {radius}")]
    BadRadius {
        /// The radius given.
        radius: f64,
    },
    /// A capsule whose axis has zero, negative or non-finite length.
    #[error("capsule half-height must be finite, positive and under 1 km, got {half_height}")]
    DegenerateAxis {
        /// The half-height given.
        half_height: f64,
    },
    /// A pose with a NaN or infinite component, or a rotation that is not a unit quaternion.
    #[error("collider {collider} got a non-finite or non-unit pose")]
    BadPose {
        /// Index of the collider.
        collider: usize,
    },
    /// A size that is not finite, positive and under 1 km.
    #[error("{what} must be finite, positive and under 1 km, got {value}")]
    BadSize {
        /// Which size.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A tapered capsule whose radii differ by its axis' length or more (one ball holds the
    /// other).
    #[error(
        "tapered capsule radii {bottom_radius} and {top_radius} differ by at least its axis length {}",
        2.0 * half_height
    )]
    TaperTooSteep {
        /// Half the axis length.
        half_height: f64,
        /// Radius at `-half_height`.
        bottom_radius: f64,
        /// Radius at `+half_height`.
        top_radius: f64,
    },
    /// A hull or mesh vertex that is not finite or lies 1 km or more from the origin.
    #[error("vertex {index} must be finite and within 1 km, got {vertex}")]
    BadVertex {
        /// Index of the vertex.
        index: usize,
        /// The vertex given.
        vertex: DVec3,
    },
    /// Hull points spanning no volume: fewer than four, or all on a plane or a line.
    #[error("convex hull of {points} points spans no volume (fewer than 4, or coplanar)")]
    DegenerateHull {
        /// Number of points given.
        points: usize,
    },
    /// A triangle mesh without triangles.
    #[error("triangle mesh has no triangles")]
    EmptyMesh,
    /// A triangle index past the vertices.
    #[error("triangle {triangle} names vertex {index}, but there are {vertices}")]
    BadIndex {
        /// Index of the triangle.
        triangle: usize,
        /// The index given.
        index: u32,
        /// Number of vertices.
        vertices: usize,
    },
    /// A triangle of zero area.
    #[error("triangle {triangle} has no area")]
    DegenerateTriangle {
        /// Index of the triangle.
        triangle: usize,
    },
    /// A closed mesh wound clockwise seen from outside (its volume comes out negative).
    #[error(
        "closed triangle mesh is inside out (signed volume {volume} m3): wind its triangles counter-clockwise seen from outside"
    )]
    InvertedMesh {
        /// The signed volume found.
        volume: f64,
    },
    /// A mesh parry3d refused (its reason).
    #[error("triangle mesh refused: {reason}")]
    BadMesh {
        /// Why.
        reason: String,
    },
    /// A height field whose sample count is not `rows * columns`, or under 2 x 2.
    #[error(
        "height field of {rows} x {columns} samples needs rows * columns (each >= 2) heights, got {got}"
    )]
    HeightFieldSamples {
        /// Samples along Z.
        rows: usize,
        /// Samples along X.
        columns: usize,
        /// Heights given.
        got: usize,
    },
    /// A height that is not finite or is 1 km or more.
    #[error("height {index} must be finite and under 1 km, got {height}")]
    BadHeight {
        /// Index of the height (row by row).
        index: usize,
        /// The height given.
        height: f64,
    },
    /// No collider with this index.
    #[error("no collider {collider} (there are {count})")]
    NoSuchCollider {
        /// The index asked for.
        collider: usize,
        /// Number of colliders.
        count: usize,
    },
}

/// A collider's handle: its index in the [`ColliderSet`].
pub type ColliderId = usize;

#[derive(Debug, Clone)]
struct Entry {
    shape: ColliderShape,
    /// Pose at the start of the frame being simulated.
    previous: Pose,
    /// Pose at its end.
    current: Pose,
    /// Removed ([`ColliderSet::remove`]): collides with nothing, its slot free for the next
    /// [`ColliderSet::add`].
    removed: bool,
    /// Which cloths it meets ([`ColliderSet::set_groups`]).
    groups: CollisionGroups,
    /// The set's revision when it was added or its groups last changed.
    stamp: u64,
}

/// Kinematic bodies the cloths collide with (a character's capsules, the ground). Shared by every
/// cloth stepped in a frame. Call [`ColliderSet::set_pose`] before stepping the cloths and
/// [`ColliderSet::finish_frame`] after.
#[derive(Debug, Clone, Default)]
pub struct ColliderSet {
    entries: Vec<Entry>,
    /// Counts additions and removals (a sleeping cloth wakes when it changes).
    revision: u64,
}

impl ColliderSet {
    /// The empty set (what [`crate::Cloth::step`] collides with).
    pub const EMPTY: ColliderSet = ColliderSet {
        entries: Vec::new(),
        revision: 0,
    };

    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a body at `pose` (at rest there), in the slot of the first removed collider if there
    /// is one. Bad sizes or a bad pose are refused.
    pub fn add(&mut self, shape: ColliderShape, pose: Pose) -> Result<ColliderId, ColliderError> {
        shape.validate()?;
        let id = self
            .entries
            .iter()
            .position(|e| e.removed)
            .unwrap_or(self.entries.len());
        if !pose.is_valid() {
            return Err(ColliderError::BadPose { collider: id });
        }
        let pose = Pose::new(pose.translation, pose.rotation.normalize());
        let entry = Entry {
            shape,
            previous: pose,
            current: pose,
            removed: false,
            groups: CollisionGroups::ALL,
            stamp: self.revision + 1,
        };
        match self.entries.get_mut(id) {
            Some(e) => *e = entry,
            None => self.entries.push(entry),
        }
        self.revision += 1;
        Ok(id)
    }

    /// Sets the collision groups of collider `id` (default [`CollisionGroups::ALL`]): a cloth
    /// meets it only when their groups meet ([`CollisionGroups::meets`]). Takes effect at the
    /// next step.
    pub fn set_groups(
        &mut self,
        id: ColliderId,
        groups: CollisionGroups,
    ) -> Result<(), ColliderError> {
        let stamp = self.revision + 1;
        let e = self.entry_mut(id)?;
        if e.groups != groups {
            e.groups = groups;
            e.stamp = stamp;
            self.revision += 1;
        }
        Ok(())
    }

    /// The collision groups of collider `id`, if it exists.
    pub fn groups(&self, id: ColliderId) -> Option<CollisionGroups> {
        self.entries
            .get(id)
            .filter(|e| !e.removed)
            .map(|e| e.groups)
    }

    /// How many colliders a cloth of `groups` meets (removed ones left out).
    pub fn count_meeting(&self, groups: CollisionGroups) -> usize {
        self.entries
            .iter()
            .filter(|e| !e.removed && groups.meets(e.groups))
            .count()
    }

    /// Removes collider `id` (a despawned bone): from the next step on it collides with nothing,
    /// and its id may be handed out again by [`ColliderSet::add`].
    pub fn remove(&mut self, id: ColliderId) -> Result<(), ColliderError> {
        self.entry_mut(id)?.removed = true;
        self.revision += 1;
        Ok(())
    }

    /// Number of ids handed out: every collider's id is below it (a removed collider's id stays
    /// counted until [`ColliderSet::add`] reuses it; its shape and pose are then `None`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no collider was ever added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Counts additions, removals and group changes (not poses): what a cache of per-collider
    /// data (a cloth's [`BodyExclusions`]) is keyed on.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The [`ColliderSet::revision`] at which collider `id` was added or its groups last
    /// changed (`None` if it does not exist or was removed): a cache of data about a few
    /// colliders is keyed on theirs, so that colliders coming and going elsewhere leave it
    /// valid.
    pub fn stamp(&self, id: ColliderId) -> Option<u64> {
        self.entries.get(id).filter(|e| !e.removed).map(|e| e.stamp)
    }

    /// The shape of collider `id` (`None` if there is none or it was removed).
    pub fn shape(&self, id: ColliderId) -> Option<ColliderShape> {
        self.entry(id).map(|e| e.shape.clone())
    }

    /// The pose of collider `id` at the end of the coming frame.
    pub fn pose(&self, id: ColliderId) -> Option<Pose> {
        self.entry(id).map(|e| e.current)
    }

    fn entry(&self, id: ColliderId) -> Option<&Entry> {
        self.entries.get(id).filter(|e| !e.removed)
    }

    fn entry_mut(&mut self, id: ColliderId) -> Result<&mut Entry, ColliderError> {
        let count = self.entries.len();
        self.entries
            .get_mut(id)
            .filter(|e| !e.removed)
            .ok_or(ColliderError::NoSuchCollider {
                collider: id,
                count,
            })
    }

    /// Sets where collider `id` will be at the end of the coming frame; it moves there from its
    /// last pose across the frame's substeps. A non-finite pose is refused and the collider
    /// keeps its old one.
    pub fn set_pose(&mut self, id: ColliderId, pose: Pose) -> Result<(), ColliderError> {
        if !pose.is_valid() {
            return Err(ColliderError::BadPose { collider: id });
        }
        let e = self.entry_mut(id)?;
        e.current = Pose::new(pose.translation, pose.rotation.normalize());
        Ok(())
    }

    /// Puts collider `id` at `pose` without sweeping through the space between (a respawn).
    pub fn teleport(&mut self, id: ColliderId, pose: Pose) -> Result<(), ColliderError> {
        self.set_pose(id, pose)?;
        let e = self.entry_mut(id)?;
        e.previous = e.current;
        Ok(())
    }

    /// Changes the shape of collider `id` (validated).
    pub fn set_shape(&mut self, id: ColliderId, shape: ColliderShape) -> Result<(), ColliderError> {
        shape.validate()?;
        self.entry_mut(id)?.shape = shape;
        Ok(())
    }

    /// Ends a frame: every collider's end pose becomes the start pose of the next.
    pub fn finish_frame(&mut self) {
        for e in &mut self.entries {
            e.previous = e.current;
        }
    }

    /// Pose of collider `id` at fraction `s` of the frame (0 = start, 1 = end).
    pub fn pose_at(&self, id: ColliderId, s: f64) -> Option<Pose> {
        self.entry(id)
            .map(|e| e.previous.interpolate(&e.current, s))
    }

    /// Whether a collider that moved this frame comes within `margin` of the box `min..max`,
    /// plus the broad phase's allowance (2 cm): sleeping cloths wake on it.
    pub(crate) fn moved_near(&self, min: DVec3, max: DVec3, margin: f64) -> bool {
        let b = Aabb { min, max }.inflate(SLACK);
        self.entries.iter().any(|e| {
            !e.removed
                && e.previous != e.current
                && Swept::new(&e.shape, &e.previous, &e.current, margin).overlaps(&b)
        })
    }

    /// How far a collider that moves this frame, and whose swept box comes within `margin` of
    /// the box `b` (plus the broad phase's allowance), may carry what it touches: the most
    /// its box moves along an axis over the frame (a plane: how far its origin moves). 0 when
    /// no such collider moves. Layers use it to see cloths a body may press together in a
    /// frame ([`crate::layering`]).
    pub(crate) fn push_reach(&self, b: &Aabb, margin: f64) -> f64 {
        let b = b.inflate(SLACK);
        let mut reach = 0.0f64;
        for e in &self.entries {
            if e.removed
                || e.previous == e.current
                || !Swept::new(&e.shape, &e.previous, &e.current, margin).overlaps(&b)
            {
                continue;
            }
            let moved = match e.shape.local_half_extents(0.0) {
                Some(he) => {
                    let (b0, b1) = (
                        body::world_box(he, &e.previous),
                        body::world_box(he, &e.current),
                    );
                    (b1.min - b0.min)
                        .abs()
                        .max((b1.max - b0.max).abs())
                        .max_element()
                }
                None => e.previous.translation.distance(e.current.translation),
            };
            reach = reach.max(moved);
        }
        reach
    }

    /// Signed distance of `p` from the surface of collider `id` at the end of the frame
    /// (negative inside).
    pub fn signed_distance(&self, id: ColliderId, p: DVec3) -> Option<f64> {
        let e = self.entry(id)?;
        Some(
            Body::new(&e.shape, e.current, 0.0)
                .signed_distance(e.current.inverse_transform_point(p)),
        )
    }

    /// How many of `points` lie inside a collider (signed distance below 0) at the end of the
    /// frame: the "nodes inside a body" the examples report (a node in the thickness layer but
    /// outside the surface is not counted: see [`ColliderSet::max_penetration`]).
    pub fn count_inside(&self, points: &[DVec3]) -> usize {
        points
            .iter()
            .filter(|&&p| {
                (0..self.len()).any(|id| self.signed_distance(id, p).is_some_and(|d| d < 0.0))
            })
            .count()
    }

    /// Largest depth of any of `points` inside the layer of `thickness` around any collider at
    /// the end of the frame: `max(0, thickness - signed distance)` (docs/design.md section 6,
    /// "penetration").
    pub fn max_penetration(&self, points: &[DVec3], thickness: f64) -> f64 {
        self.max_penetration_meeting(points, thickness, CollisionGroups::ALL)
    }

    /// [`ColliderSet::max_penetration`] over the colliders a cloth of `groups` meets (those it
    /// may overlap are not penetrated: it does not collide with them).
    pub fn max_penetration_meeting(
        &self,
        points: &[DVec3],
        thickness: f64,
        groups: CollisionGroups,
    ) -> f64 {
        let mut worst = 0.0f64;
        for e in self
            .entries
            .iter()
            .filter(|e| !e.removed && groups.meets(e.groups))
        {
            let body = Body::new(&e.shape, e.current, 0.0);
            for &p in points {
                let d = body.signed_distance(e.current.inverse_transform_point(p));
                worst = worst.max(thickness - d);
            }
        }
        worst
    }
}

/// Contact settings of one cloth: plain data, serde-loadable.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContactSettings {
    /// Cloth thickness in metres: nodes are kept this far outside every body. Default 0.005.
    pub thickness: f64,
    /// Coulomb friction coefficient against bodies, >= 0. Default 0.3.
    pub friction: f64,
    /// Whether contact is handled at all. Default true.
    pub enabled: bool,
    /// Speed (m/s) at which a node found inside a body at the start of a substep (cloth spawned
    /// or teleported into a character) is eased out, instead of being thrown out in one
    /// substep. Nodes that enter a body during a substep are always stopped at its surface.
    /// Default 1.
    pub max_depenetration_speed: f64,
    /// Split impulses: the contact forces may stop a node's motion along the displacement
    /// they cause (`K^-1 r`), not throw it: after the iterations, along that displacement each
    /// node keeps at most the larger of zero and the velocity it would have had without it.
    /// With a fixed iteration budget the global solve answers a push with the whole cloth (the
    /// flap beyond a bar's contact line is lifted with it before the local steps let it bend),
    /// and without the split a sheet dropped on a bar leaves with that lift and slides off.
    /// It also damps motion the body's support passes through the cloth: a frictionless sheet
    /// dropped off-centre on a bar can balance on it instead of sliding off
    /// (`docs/lab/2026-11-27-one-iteration.md`). Default true.
    pub split_impulses: bool,
    /// Which bodies this cloth meets ([`CollisionGroups`]; in files, lists of group numbers
    /// 1 to 32). A body whose groups do not meet these is not seen by the broad phase. Default
    /// [`CollisionGroups::ALL`].
    pub groups: CollisionGroups,
}

impl Default for ContactSettings {
    fn default() -> Self {
        Self {
            thickness: 0.005,
            friction: 0.3,
            enabled: true,
            max_depenetration_speed: 1.0,
            split_impulses: true,
            groups: CollisionGroups::ALL,
        }
    }
}

impl ContactSettings {
    /// Checks ranges: thickness finite in [0, 0.5] m, friction finite in [0, 10].
    pub fn validate(&self) -> Result<(), crate::ClothError> {
        if !(self.thickness.is_finite() && (0.0..=0.5).contains(&self.thickness)) {
            return Err(crate::ClothError::InvalidSetting {
                name: "thickness",
                reason: format!("must be in [0, 0.5] m, got {}", self.thickness),
            });
        }
        if !(self.friction.is_finite() && (0.0..=10.0).contains(&self.friction)) {
            return Err(crate::ClothError::InvalidSetting {
                name: "friction",
                reason: format!("must be in [0, 10], got {}", self.friction),
            });
        }
        crate::error::positive("max_depenetration_speed", self.max_depenetration_speed)
    }
}

/// Bodies that do not push some of a cloth's nodes (per node, a short list of colliders):
/// the nodes a pin holds and the ring next to them, against the bodies of the bones that hold
/// them, so that a body and a pin do not fight over a node (the ECS layer fills it from the
/// cloth's attachments, [`crate::Cloth::set_body_exclusions`]). Empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BodyExclusions {
    /// Node `i`'s excluded colliders are `bodies[start[i]..start[i + 1]]` (empty: none).
    start: Vec<u32>,
    bodies: Vec<u32>,
}

impl BodyExclusions {
    /// From `(node, collider)` pairs for a cloth of `nodes` nodes (any order, repeats merged).
    /// A node index out of range is refused.
    pub fn new(
        nodes: usize,
        given: impl IntoIterator<Item = (u32, ColliderId)>,
    ) -> Result<Self, crate::ClothError> {
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for (node, body) in given {
            if node as usize >= nodes || body > u32::MAX as usize {
                return Err(crate::ClothError::InvalidSetting {
                    name: "body exclusions",
                    reason: format!("node {node} of a cloth of {nodes} nodes, collider {body}"),
                });
            }
            pairs.push((node, body as u32));
        }
        if pairs.is_empty() {
            return Ok(Self::default());
        }
        pairs.sort_unstable();
        pairs.dedup();
        let mut start = vec![0u32; nodes + 1];
        for &(n, _) in &pairs {
            start[n as usize + 1] += 1;
        }
        for i in 0..nodes {
            start[i + 1] += start[i];
        }
        Ok(Self {
            start,
            bodies: pairs.into_iter().map(|(_, b)| b).collect(),
        })
    }

    /// Whether no node has an exclusion.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// The node count it was made for (0 when empty).
    pub fn node_count(&self) -> usize {
        self.start.len().saturating_sub(1)
    }

    /// How many (node, collider) pairs are excluded.
    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    /// Whether collider `body` does not push `node`.
    pub fn excludes(&self, node: u32, body: u32) -> bool {
        match self.start.get(node as usize..node as usize + 2) {
            Some(&[s, e]) => self.bodies[s as usize..e as usize].contains(&body),
            _ => false,
        }
    }
}

/// The force a body pushed one node with at the end of a step (what the next step starts
/// from; [`crate::ClothSnapshot`] keeps the list).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContactForce {
    /// Cloth node.
    pub node: u32,
    /// Collider index in the [`ColliderSet`].
    pub body: u32,
    /// Force on the node in newtons (world frame): normal and friction parts.
    pub force: DVec3,
    /// Where the node sticks (static friction), in the body's own frame: while the friction
    /// force stays inside the Coulomb cone, the node's slip is measured from this point from
    /// substep to substep, so that the drift an unconverged iteration leaves is pulled back
    /// instead of adding up. `None` for a sliding node. Default `None` (older snapshots).
    #[serde(default)]
    pub anchor: Option<DVec3>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bad shapes and poses are refused with typed errors and leave the set unchanged.
    #[test]
    fn bad_collider_data_is_refused() {
        let mut set = ColliderSet::new();
        assert!(matches!(
            set.add(
                ColliderShape::Capsule {
                    half_height: 0.1,
                    radius: -0.1
                },
                Pose::IDENTITY
            ),
            Err(ColliderError::BadRadius { .. })
        ));
        assert!(matches!(
            set.add(
                ColliderShape::Capsule {
                    half_height: 0.0,
                    radius: 0.1
                },
                Pose::IDENTITY
            ),
            Err(ColliderError::DegenerateAxis { .. })
        ));
        let id = set
            .add(ColliderShape::Sphere { radius: 0.1 }, Pose::IDENTITY)
            .unwrap();
        let bad = Pose::from_translation(DVec3::new(f64::NAN, 0.0, 0.0));
        assert!(matches!(
            set.set_pose(id, bad),
            Err(ColliderError::BadPose { .. })
        ));
        assert_eq!(set.pose(id), Some(Pose::IDENTITY));
        assert!(matches!(
            set.set_pose(7, Pose::IDENTITY),
            Err(ColliderError::NoSuchCollider { .. })
        ));
    }
}
