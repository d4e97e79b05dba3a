//! Kinematic bodies (a character's capsules, spheres and tapered capsules; the world's planes,
//! boxes, cylinders, convex hulls, height fields and triangle meshes) and contact inside the
//! iterations.
//!
//! This is the only module that calls parry3d. Colliders are posed by the game every frame
//! ([`ColliderSet::set_pose`] gives the pose at the *end* of the coming frame; the pose at its
//! start is the last one set), and every substep sees the pose interpolated between the two
//! (linear in translation, spherical in rotation).
//!
//! Contact (DESIGN.md section 5) is a force per touching node inside the solver's loop, the
//! prefactored matrix untouched. Each (node, body) candidate carries a force that the global
//! solve adds to the node's right-hand side (local-global) or subtracts from the gradient
//! (L-BFGS). After every solve (`ContactPass::measure`, `ContactPass::update`) each
//! candidate's gap is measured **in the collider's moving frame**: the node's path from its
//! position at the start of the substep (seen in the collider's start pose) to its current
//! iterate (seen in the end pose) is a segment in the collider's local frame, and a node whose
//! path crossed the body's middle is measured from the tangent plane where it entered, so a
//! thin limb sweeping through a hanging sheet pushes it instead of passing through it. The
//! normal force grows by the gap over the node's compliance (how far a unit force moves it in
//! the whole cloth) and stays pushing; the tangential force cancels the slip relative to the
//! body's surface point the node started on, inside the Coulomb cone `|r_t| <= mu r_n`
//! (sticking inside it, sliding on its edge). Forces are warm-started across substeps and frames
//! (the cloth keeps them). A last pass puts nodes still inside on the surface, restores
//! conformity around them and checks every path against the bodies' swept boxes, so no node is
//! left inside a body deeper than rounding.
//!
//! A broad phase runs once per substep: the cloth's box (start positions and predictions) against
//! each collider's box swept over the substep, then each node's box against the surviving
//! colliders' boxes, giving a list of (node, collider) candidates; only those are tested in the
//! iterations.

mod groups;
mod shapes;

use std::sync::Arc;

use glam::{DQuat, DVec3, Vec3};
use parry3d::query::{PointQuery, Ray, RayCast};
use parry3d::shape::{Ball, Capsule, HalfSpace};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::bounds::Aabb;
use crate::flags::NodeFlags;
use crate::limits::NodeLimit;
use crate::self_contact::{RawPair, SelfContact, SelfFrame};

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
        let e = self.entry_mut(id)?;
        if e.groups != groups {
            e.groups = groups;
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

    /// Signed distance of `p` from the surface of collider `id` at the end of the frame
    /// (negative inside).
    pub fn signed_distance(&self, id: ColliderId, p: DVec3) -> Option<f64> {
        let e = self.entry(id)?;
        Some(
            Body::new(&e.shape, e.current, 0.0)
                .signed_distance(e.current.inverse_transform_point(p)),
        )
    }

    /// Largest depth of any of `points` inside the layer of `thickness` around any collider at
    /// the end of the frame: `max(0, thickness - signed distance)` (DESIGN.md section 6,
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

/// One collider posed for a query, with its parry shape inflated by the cloth thickness, or
/// one of `shapes`' with the thickness to grow it by.
#[derive(Clone, Debug)]
enum Inflated {
    Capsule(Capsule),
    Ball(Ball),
    Plane(HalfSpace, f32),
    Other(shapes::Query, f64),
}

#[derive(Clone)]
struct Body {
    shape: Inflated,
    pose: Pose,
}

impl Body {
    fn new(shape: &ColliderShape, pose: Pose, thickness: f64) -> Self {
        let shape = match *shape {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => Inflated::Capsule(Capsule::new_y(
                half_height as f32,
                (radius + thickness) as f32,
            )),
            ColliderShape::Sphere { radius } => {
                Inflated::Ball(Ball::new((radius + thickness) as f32))
            }
            ColliderShape::Plane => Inflated::Plane(HalfSpace::new(Vec3::Y), thickness as f32),
            ref other => match other.query(thickness) {
                Some(q) => Inflated::Other(q, thickness),
                None => unreachable!("capsules, spheres and planes are matched above"),
            },
        };
        Self { shape, pose }
    }

    /// Signed distance of a local point from the inflated surface (negative inside).
    fn signed_distance(&self, p: DVec3) -> f64 {
        self.surface(p).signed
    }

    /// The inflated surface seen from a local point, in one query of the shape (`shapes`' own)
    /// or a projection and an inside test (parry3d's).
    fn surface(&self, p: DVec3) -> Surface {
        if let Inflated::Other(q, t) = &self.shape {
            let (point, normal, signed) = q.surface(p, *t);
            return Surface {
                point,
                normal,
                signed,
                inside: signed < 0.0,
            };
        }
        let (point, normal) = self.project(p);
        let inside = self.contains(p);
        let signed = match self.shape {
            Inflated::Plane(_, t) => p.y - t as f64,
            _ => {
                let d = point.distance(p);
                if inside { -d } else { d }
            }
        };
        Surface {
            point,
            normal,
            signed,
            inside,
        }
    }

    /// [`Body::surface`] for a point inside the body (`None` outside), without projecting a
    /// point that parry3d finds outside.
    fn surface_inside(&self, p: DVec3) -> Option<Surface> {
        match self.shape {
            Inflated::Other(..) => Some(self.surface(p)).filter(|s| s.inside),
            _ => self.contains(p).then(|| self.surface(p)),
        }
    }

    /// Whether a node that began the substep at local `p` started inside the body, deeper than
    /// rounding: a node left on the surface by the last substep is on it to within the `f32`
    /// rounding of the shape queries, and about half the time just inside.
    fn started_inside(&self, p: DVec3) -> bool {
        self.start_inside_depth(p).is_some()
    }

    /// How far a point found [`Body::started_inside`] is from the surface.
    fn start_inside_depth(&self, p: DVec3) -> Option<f64> {
        self.surface_inside(p)
            .map(|s| s.point.distance(p))
            .filter(|&d| d > START_INSIDE)
    }

    /// Whether a local point is inside the inflated body (parry3d's shapes; `shapes`' answer in
    /// [`Body::surface`]).
    fn contains(&self, p: DVec3) -> bool {
        let q = p.as_vec3();
        match &self.shape {
            Inflated::Other(..) => unreachable!("Body::surface answers for these shapes"),
            Inflated::Capsule(c) => c.contains_local_point(q),
            Inflated::Ball(b) => b.contains_local_point(q),
            Inflated::Plane(h, t) => h.contains_local_point(q - Vec3::Y * *t),
        }
    }

    /// Nearest point on the inflated surface to a local point and the outward normal there.
    fn project(&self, p: DVec3) -> (DVec3, DVec3) {
        let q = p.as_vec3();
        let proj = match &self.shape {
            Inflated::Other(q, t) => {
                let (s, n, _) = q.surface(p, *t);
                return (s, n);
            }
            Inflated::Capsule(c) => c.project_local_point(q, false).point,
            Inflated::Ball(b) => b.project_local_point(q, false).point,
            Inflated::Plane(h, t) => {
                let s = h.project_local_point(q - Vec3::Y * *t, false).point + Vec3::Y * *t;
                // Keep the tangential coordinates in f64 (only the height is snapped).
                return (DVec3::new(p.x, s.y as f64, p.z), DVec3::Y);
            }
        };
        let proj = proj.as_dvec3();
        (proj, self.normal_at(proj))
    }

    /// Outward normal at a local surface point.
    fn normal_at(&self, s: DVec3) -> DVec3 {
        match &self.shape {
            Inflated::Capsule(c) => {
                let h = c.segment.b.y.abs() as f64;
                let axis = DVec3::new(0.0, s.y.clamp(-h, h), 0.0);
                (s - axis).normalize_or(DVec3::Y)
            }
            Inflated::Ball(_) => s.normalize_or(DVec3::Y),
            Inflated::Plane(..) => DVec3::Y,
            Inflated::Other(..) => unreachable!("Body::surface answers for these shapes"),
        }
    }

    /// First time in [0, 1] at which the local segment `p0 -> p1` touches the surface, with the
    /// outward normal there.
    fn cast(&self, p0: DVec3, p1: DVec3) -> Option<(f64, DVec3)> {
        let d = p1 - p0;
        let ray = Ray::new(p0.as_vec3(), d.as_vec3());
        let toi = match &self.shape {
            Inflated::Other(q, t) => return q.cast(p0, p1, *t),
            Inflated::Capsule(c) => c.cast_local_ray(&ray, 1.0, true),
            Inflated::Ball(b) => b.cast_local_ray(&ray, 1.0, true),
            Inflated::Plane(h, t) => {
                let shifted = Ray::new(ray.origin - Vec3::Y * *t, ray.dir);
                h.cast_local_ray(&shifted, 1.0, true)
            }
        }? as f64;
        let hit = p0 + toi * d;
        let (_, normal) = self.project(hit);
        Some((toi, normal))
    }

    /// [`Body::start_depth`] of `p0`, and a radius around `p0` (carried with the body to the
    /// substep's end) within which the node's gap is known to stay positive and its path not
    /// to cross the body (see [`Gap::clear`]): half its distance from the surface, for the
    /// shapes whose one query gives that distance anyway (`shapes`'), else 0.
    fn start_query(&self, p0: DVec3) -> (Option<f64>, f64) {
        if let Inflated::Other(..) = self.shape {
            let s = self.surface(p0);
            if s.inside {
                let depth = s.point.distance(p0);
                return ((depth > START_INSIDE).then_some(-depth), 0.0);
            }
            return (None, clear_radius(s.signed, 0.0));
        }
        (self.start_depth(p0), 0.0)
    }

    /// The signed depth of a node that started the substep inside the body (see
    /// [`Body::started_inside`]) at local `p0`, or `None`: what [`Body::gap_from`] needs of the
    /// substep's start, kept per candidate so that the iterations do not query it again.
    fn start_depth(&self, p0: DVec3) -> Option<f64> {
        if let Inflated::Plane(..) = self.shape {
            return None; // the plane's gap reads the start's height directly
        }
        self.start_inside_depth(p0).map(|d| -d)
    }

    /// The gap of a node that moved from local `p0` (seen in the body's pose at the start of
    /// the substep) to local `p1` (in its pose at the end). On its own side of the body, the
    /// signed distance from the nearest point of the inflated surface, along the normal there.
    /// A node whose relative path entered the surface and crossed the body's middle (a thin
    /// limb swept past it within the substep) must go back out the way it came in: its gap is
    /// measured from the tangent plane where it entered. A node that started the substep
    /// inside (spawned or teleported there) may come out by at most `max_push` a substep.
    /// `start` is [`Body::start_depth`] of `p0`, kept per candidate.
    fn gap_from(&self, p0: DVec3, start: Option<f64>, p1: DVec3, max_push: f64) -> Gap {
        if let Inflated::Plane(_, t) = self.shape {
            let s1 = p1.y - t as f64;
            let s0 = p0.y - t as f64;
            let allowed = if s0 < -START_INSIDE {
                (s0 + max_push).min(0.0)
            } else {
                0.0
            };
            let gap = s1 - allowed;
            // The path of a node that started above the layer stays above it within the gap.
            let clear = if s0 > CLEAR_MARGIN {
                (gap - CLEAR_MARGIN).max(0.0)
            } else {
                0.0
            };
            return Gap {
                gap,
                normal: DVec3::Y,
                through: false,
                clear,
            };
        }
        let Surface {
            normal: n,
            signed: s1,
            inside,
            ..
        } = self.surface(p1);
        if let Some(s0) = start {
            // No clear radius: `Body::resolve` eases such a node out further than its gap.
            return Gap {
                gap: s1 - (s0 + max_push).min(0.0),
                normal: n,
                through: false,
                clear: 0.0,
            };
        }
        // Outside and nearer to where it started than to the surface: it cannot have crossed.
        if (inside || p1.distance(p0) > s1)
            && let Some((t, entry_normal)) = self.cast(p0, p1)
            && n.dot(entry_normal) < 0.0
        {
            let entry = p0 + t * (p1 - p0);
            return Gap {
                gap: entry_normal.dot(p1 - entry),
                normal: entry_normal,
                through: true,
                clear: 0.0,
            };
        }
        Gap {
            gap: s1,
            normal: n,
            through: false,
            clear: clear_radius(s1, p1.distance(p0)),
        }
    }

    /// Where a node that moved from local `p0` to local `p1` (relative to this body) ends up,
    /// with the outward normal and the length of the normal correction; `None` if it stays
    /// outside.
    fn resolve(&self, p0: DVec3, p1: DVec3, max_push: f64) -> Option<(DVec3, DVec3, f64)> {
        // Farther from the surface than the path is long: the path stays outside (the
        // distance is 1-Lipschitz), which is the answer the queries below would give, at one
        // query instead of three (`shapes`' queries cost most).
        if let Inflated::Other(q, t) = &self.shape
            && q.surface(p0, *t).2 > p0.distance(p1) + CLEAR_MARGIN
        {
            return None;
        }
        if !self.started_inside(p0)
            && let Some((t, n)) = self.cast(p0, p1)
        {
            // Entered through the surface at p0 + t (p1 - p0): keep the sliding part of the rest
            // of the motion, drop the part into the body.
            let entry = p0 + t * (p1 - p0);
            let rest = p1 - entry;
            let into = rest.dot(n).min(0.0);
            let mut q = p1 - into * n;
            let mut depth = -into;
            if let Some(s) = self.surface_inside(q) {
                depth += s.point.distance(q);
                q = s.point;
            }
            return Some((q, n, depth));
        }
        self.surface_inside(p1)
            .map(|s| self.push_out(p0, p1, &s, max_push))
    }

    /// Nearest surface point to a local `p1` inside the body, with the normal and the distance
    /// moved; a node that already started the substep inside (`p0`) moves at most `max_push`
    /// toward the surface, so that cloth spawned or teleported into a body eases out instead of
    /// being thrown.
    fn push_out(
        &self,
        p0: DVec3,
        p1: DVec3,
        inside: &Surface,
        max_push: f64,
    ) -> (DVec3, DVec3, f64) {
        let (s, n) = (inside.point, inside.normal);
        let d = s.distance(p1);
        if d > max_push && self.started_inside(p0) {
            (p1 + max_push * n, n, max_push)
        } else {
            (s, n, d)
        }
    }
}

/// One (node, body) pair near enough to touch during a substep, with its contact force.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    /// Cloth node.
    pub node: u32,
    /// Collider index, or with `limit` the index of the substep's [`NodeLimit`].
    pub body: u32,
    /// Whether this is a game constraint ([`crate::limits`]): frictionless, not a contact.
    pub limit: bool,
    /// The force the body pushes the node with (world, newtons): normal and friction parts,
    /// carried over from iteration to iteration and from substep to substep.
    pub force: DVec3,
    /// The node's gap at the current iterate (see [`ContactPass::measure`]).
    gap: f64,
    /// World outward normal at the current iterate.
    normal: DVec3,
    /// Whether the node is in the contact set: pushed, or inside.
    engaged: bool,
    /// How far a unit normal force moves the node when every engaged node is pushed alike
    /// (m/N; see [`ContactPass::set_response`]).
    compliance: f64,
    /// Whether `compliance` was measured while the candidate was engaged.
    measured: bool,
    /// Gap at the previous iteration (NaN: none yet).
    prev_gap: f64,
    /// Where the node began the substep, in the body's frame at the substep's start.
    p0: DVec3,
    /// The point slip is measured from, carried with the body to the substep's end (world):
    /// `p0`, or for a node that stuck at the end of the last substep its anchor
    /// ([`ContactForce::anchor`]).
    anchor: DVec3,
    /// The anchor in the body's frame (NaN: the node did not stick, and `anchor` is `p0`
    /// carried with the body).
    anchor_local: DVec3,
    /// [`Body::start_depth`] of `p0`.
    start: Option<f64>,
    /// Compliance after the overshoots seen this substep (see [`ContactPass::update`]).
    overshoot: f64,
    /// The projected step proposed by [`ContactPass::propose`].
    step: DVec3,
    /// Where (world) the gap was last measured against a body.
    measured_at: DVec3,
    /// [`Gap::clear`] there: while its node stays within this distance of `measured_at`, an
    /// unpushed candidate is known to stay out of the contact set without a query (its `gap`
    /// and `normal` are then those last measured, and are not read).
    clear: f64,
}

impl Candidate {
    /// A candidate at the start of a substep, not yet measured: `force` is its warm start,
    /// `p0`, `carried` and `start` describe where its node began against a body (unused for a
    /// limit), `clear` how far from `carried` it is known to stay clear of it
    /// ([`Body::start_query`]).
    fn new(
        node: u32,
        body: u32,
        limit: bool,
        force: DVec3,
        (p0, carried, start, clear): (DVec3, DVec3, Option<f64>, f64),
    ) -> Self {
        Self {
            node,
            body,
            limit,
            force,
            gap: f64::INFINITY,
            normal: DVec3::ZERO,
            engaged: false,
            compliance: 0.0,
            measured: false,
            prev_gap: f64::NAN,
            overshoot: 0.0,
            step: DVec3::ZERO,
            p0,
            anchor: carried,
            anchor_local: DVec3::NAN,
            start,
            measured_at: carried,
            clear,
        }
    }

    /// Whether the node at `x` is still within [`Candidate::clear`] of where its gap was last
    /// measured (its gap is then positive and its path does not cross the body).
    fn stays_clear(&self, x: DVec3) -> bool {
        x.distance_squared(self.measured_at) < self.clear * self.clear
    }

    /// The node's motion relative to the surface point it started the substep on (or, for a
    /// node that sticks, its anchor), tangential to the current normal, for the node at `x`.
    fn slip(&self, x: DVec3) -> DVec3 {
        let rel = x - self.anchor;
        rel - rel.dot(self.normal) * self.normal
    }
}

/// `t` scaled into the disc of radius `limit` (the Coulomb cone's slice at a normal force).
fn cone(t: DVec3, limit: f64) -> DVec3 {
    let len = t.length();
    if len > limit {
        t * if len > 0.0 { limit / len } else { 0.0 }
    } else {
        t
    }
}

/// The collective compliance a cloth last measured: the contact set's nodes (engaged
/// candidates in candidate order) and the compliance each one took. It depends only on the
/// factor and the set, so a later substep or step whose contact set is the same takes it from
/// here instead of solving again, with bit-identical results: a cloth resting on a body keeps
/// one contact set from substep to substep. The cloth keeps it; [`ContactPass::load`] and
/// [`ContactPass::store`] swap it in and out (no copy). Cleared when the cloth's factor changes.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResponseCache {
    nodes: Vec<u32>,
    compliance: Vec<f64>,
}

impl ResponseCache {
    /// Forgets the measurement (the factor changed).
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.compliance.clear();
    }
}

/// A body's inflated surface seen from a local point ([`Body::surface`]).
#[derive(Debug, Clone, Copy)]
struct Surface {
    /// The nearest point of the surface.
    point: DVec3,
    /// The outward normal there.
    normal: DVec3,
    /// The point's signed distance from the surface (negative inside).
    signed: f64,
    /// Whether the point is inside.
    inside: bool,
}

/// A friction force below this fraction of the Coulomb limit `mu r_n` at a substep's end
/// counts as sticking: the node keeps its anchor ([`ContactForce::anchor`]).
const STICK: f64 = 0.99;

/// Farthest (metres) a sticking node's start may be from its anchor before the anchor is
/// dropped (the node then slips from where it starts the substep, as a sliding node does).
const MAX_ANCHOR_SLIP: f64 = 0.01;

/// Rounding allowance (metres) of [`clear_radius`]: the `f32` shape queries of parry3d are
/// accurate to well under it.
const CLEAR_MARGIN: f64 = 1e-6;

/// How far a node at signed distance `s` from a body's inflated surface, `d` from where it
/// started the substep (body-relative), can move without its gap turning negative or its path
/// crossing the body: within `r` the distance is at least `s - r` (it is 1-Lipschitz) and the
/// distance from the start at most `d + r`, so for `r` up to half their difference the node
/// stays outside and nearer to where it started than to the surface (less a rounding margin;
/// 0 when `s <= d`). A plane's gap, for a node that started above its layer, does not depend
/// on the path and stays positive within the gap itself, less the margin. A node that started
/// inside has none ([`Body::resolve`] eases it out further than its gap says).
fn clear_radius(s: f64, d: f64) -> f64 {
    (0.5 * (s - d) - CLEAR_MARGIN).max(0.0)
}

/// Where a node stands against one body at the current iterate.
#[derive(Debug, Clone, Copy)]
struct Gap {
    /// Signed distance along `normal` from where the node may be (negative: it must move out
    /// by that much).
    gap: f64,
    /// Outward unit normal (body-local).
    normal: DVec3,
    /// The node's relative path crossed the body's middle (it must go back the way it came).
    through: bool,
    /// A radius around the node within which its gap stays positive, its path cannot cross
    /// the body and [`Body::resolve`] leaves it where it is (0 where that is not known): a
    /// node that stays within it needs no query.
    clear: f64,
}

/// Per-substep broad phase and per-node frictional contact for one cloth (see the module
/// docs).
#[derive(Debug, Default)]
pub(crate) struct ContactPass {
    /// (node, body) pairs near enough to touch during the substep, with their forces.
    pub candidates: Vec<Candidate>,
    /// Per node: the sum of its candidates' forces, which the global solve adds to the node's
    /// right-hand side (zero for nodes touching nothing).
    pub node_force: Vec<DVec3>,
    /// Colliders whose swept box meets the cloth's box this substep.
    near: Vec<u32>,
    /// Swept box of each collider over the substep (inflated by the thickness).
    swept: Vec<Swept>,
    bodies0: Vec<Body>,
    bodies1: Vec<Body>,
    /// Coulomb friction coefficient this substep.
    friction: f64,
    /// Farthest a node that starts a substep inside a body is pushed out during it.
    max_push: f64,
    /// Nodes touching a body after the last substep (a limit's touches are not counted).
    pub last_contacts: usize,
    /// Nodes that came into contact this substep (after [`ContactPass::finish`]).
    pub impacts: usize,
    /// Per node: in contact at the end of the previous substep.
    was_touching: Vec<bool>,
    /// Nodes the last pass put on a body (held while the solver restores the linear
    /// constraints).
    held: Vec<bool>,
    /// Per node, in [`ContactPass::finish`]: a body its path is known to stay clear of
    /// ([`Candidate::stays_clear`]; `u32::MAX`: none), which the final guard need not query.
    clear_of: Vec<u32>,
    /// After [`ContactPass::finish`]: each node in contact, the outward normal and the
    /// displacement over the substep of the body's surface point under it.
    pub touched: Vec<(u32, DVec3, DVec3)>,
    /// Per node: the contact force it ended the last substep with, and its body (`u32::MAX`:
    /// none); the next substep starts from them.
    warm_force: Vec<DVec3>,
    warm_body: Vec<u32>,
    /// Per node, its sticking anchor in the warm body's frame (NaN: none; see
    /// [`ContactForce::anchor`]).
    warm_anchor: Vec<DVec3>,
    /// Size of the contact set when the collective compliance was last measured this substep.
    response_set: usize,
    /// Largest collective compliance of the last measurement.
    w_max: f64,
    /// The cloth's last measurement (swapped in by `load`, out by `store`).
    cache: ResponseCache,
    /// The substep's game constraints in node order (filled before [`ContactPass::prepare`];
    /// see [`crate::limits`]).
    pub limits: Vec<NodeLimit>,
    /// Per limit: the force (newtons, along its push) it ended the last substep with; the
    /// cloth's (swapped in by `load`, out by `store`).
    limit_warm: Vec<f64>,
    /// Whether a limit pushed its node after the last [`ContactPass::update`].
    limit_pushing: bool,
    /// The cloth against itself (see [`crate::self_contact`]).
    pub(crate) self_contact: SelfContact,
    /// Self-contact pairs engaged at the last [`ContactPass::measure`].
    self_engaged: usize,
    /// Forces saved by [`ContactPass::save_forces`]: per candidate, then the node sums at the
    /// candidates' and the self-contact pairs' nodes, in that order (every other node's sum is
    /// zero throughout the substep).
    saved_force: Vec<DVec3>,
    saved_node_force: Vec<DVec3>,
    saved_limit_pushing: bool,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body").field("pose", &self.pose).finish()
    }
}

/// The region a body may occupy over a substep, grown by a margin: the union of its boxes at
/// the substep's two ends, or for a plane the union of its two half-spaces (each an outward
/// normal and the largest `n . p` inside it). A plane's box would be unbounded, which made every
/// node of a cloth over the ground a candidate every substep.
#[derive(Clone, Copy, Debug)]
enum Swept {
    Box(Aabb),
    HalfSpaces([(DVec3, f64); 2]),
}

impl Swept {
    fn new(shape: &ColliderShape, p0: &Pose, p1: &Pose, margin: f64) -> Self {
        match shape.local_half_extents(margin) {
            Some(he) => Swept::Box(world_box(he, p0).union(world_box(he, p1))),
            None => {
                // A plane: the half-space below it, grown by the margin.
                let half = |pose: &Pose| {
                    let n = pose.transform_vector(DVec3::Y);
                    (n, n.dot(pose.translation) + margin)
                };
                Swept::HalfSpaces([half(p0), half(p1)])
            }
        }
    }

    fn overlaps(&self, b: &Aabb) -> bool {
        match self {
            Swept::Box(s) => s.overlaps(b),
            Swept::HalfSpaces(h) => {
                let centre = 0.5 * (b.min + b.max);
                let half = 0.5 * (b.max - b.min);
                h.iter()
                    .any(|&(n, c)| n.dot(centre) - n.abs().dot(half) <= c)
            }
        }
    }
}

/// World box of a bounded shape with local half-extents `he` at a pose.
fn world_box(he: DVec3, pose: &Pose) -> Aabb {
    let m = glam::DMat3::from_quat(pose.rotation);
    let abs = glam::DMat3::from_cols(m.x_axis.abs(), m.y_axis.abs(), m.z_axis.abs());
    let e = abs * he;
    Aabb {
        min: pose.translation - e,
        max: pose.translation + e,
    }
}

/// A node this close to a body's inflated surface (metres) at the end of a substep, or pushed
/// by it, counts as touching.
const TOUCH: f64 = 1e-4;

/// Depth below which a node that began a substep inside a body counts as on its surface
/// (metres; see `Body::started_inside`): well above the `f32` rounding of the shape queries in
/// body-local coordinates (about 3e-7 m on a 5 m capsule), far below any depth worth easing out.
const START_INSIDE: f64 = 1e-5;

/// A contact set that differs from the last measured one by at most `1 / REUSE_CHANGE` of it
/// reuses that measurement ([`ContactPass::reuse_response`]). Measured on the contact gallery:
/// at 1/5 and 1/20 the stale compliances of the tilting capsule's resting sheet let friction 0.8
/// creep 15.7 and 12.8 mm at the console preset (8.9 mm when measured every substep); at 1/50,
/// 74 of 78 cells are bit-identical and the others within 1.3 points of max strain.
const REUSE_CHANGE: usize = 50;

/// How far beyond its predicted path a node may wander during the iterations and still be
/// tested against a limit's sphere (metres; the last pass clamps any that went farther).
const LIMIT_SLACK: f64 = 0.002;

/// How far beyond its predicted path a node may wander during the iterations and still be
/// tested (metres).
const SLACK: f64 = 0.02;

impl ContactPass {
    /// Sizes the per-node buffers for a cloth of `nodes` nodes (reusing memory) and takes which
    /// of its nodes touched a body after its last substep, and with what force. With `bodies`
    /// (the step has colliders) it also reserves room for every node being a candidate, so that
    /// the passes of this step allocate only when a node meets several bodies at once; a
    /// workspace that never steps a cloth among bodies does not hold that room.
    /// With `limits` (the cloth has game constraints) it sizes the per-node forces and takes
    /// the cloth's last limit forces (`limit_forces`, swapped in); with `self_collision` it
    /// sizes the per-node forces and takes the cloth's last self-contact forces
    /// (`self_forces`, swapped in).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load(
        &mut self,
        touching: &NodeFlags,
        forces: &[ContactForce],
        cache: &mut ResponseCache,
        limit_forces: &mut Vec<f64>,
        bodies: bool,
        limits: bool,
        self_collision: bool,
        self_forces: &mut Vec<(RawPair, f64)>,
    ) {
        self.self_contact.reset();
        std::mem::swap(&mut self.self_contact.warm, self_forces);
        std::mem::swap(&mut self.cache, cache);
        std::mem::swap(&mut self.limit_warm, limit_forces);
        self.limits.clear();
        self.was_touching.clear();
        self.was_touching.extend(touching.iter());
        let nodes = self.was_touching.len();
        self.held.resize(nodes, false);
        self.clear_of.resize(nodes, u32::MAX);
        self.candidates.clear();
        self.touched.clear();
        self.warm_force.clear();
        self.warm_body.clear();
        self.warm_anchor.clear();
        self.node_force.clear();
        if bodies {
            self.warm_force.resize(nodes, DVec3::ZERO);
            self.warm_body.resize(nodes, u32::MAX);
            self.warm_anchor.resize(nodes, DVec3::NAN);
            for f in forces {
                let i = f.node as usize;
                if i < nodes {
                    self.warm_force[i] = f.force;
                    self.warm_body[i] = f.body;
                    self.warm_anchor[i] = f.anchor.unwrap_or(DVec3::NAN);
                }
            }
        }
        if bodies || limits || self_collision {
            self.node_force.resize(nodes, DVec3::ZERO);
            self.candidates.reserve(nodes);
            self.touched.reserve(nodes);
        }
    }

    /// Writes the forces the cloth's nodes ended the step with, one entry per node a body
    /// pushes, for the next step's warm start (empty after a step without bodies). The list keeps
    /// its memory: it grows to the most nodes ever in contact at once, then holds.
    /// The cloth's [`ResponseCache`] goes back to it.
    /// The limit forces go back to `limit_forces`.
    pub(crate) fn store(
        &mut self,
        forces: &mut Vec<ContactForce>,
        cache: &mut ResponseCache,
        limit_forces: &mut Vec<f64>,
        self_forces: &mut Vec<(RawPair, f64)>,
    ) {
        std::mem::swap(&mut self.self_contact.warm, self_forces);
        std::mem::swap(&mut self.cache, cache);
        std::mem::swap(&mut self.limit_warm, limit_forces);
        forces.clear();
        // A cloth's contact forces are at most one per node: a list that must grow grows to
        // that bound at once, so a cloth whose contact set jitters to a new most does not
        // allocate in a later frame.
        let engaged = self.warm_body.iter().filter(|&&b| b != u32::MAX).count();
        if engaged > forces.capacity() {
            forces.reserve_exact(self.warm_body.len());
        }
        for (i, ((&body, &force), &anchor)) in self
            .warm_body
            .iter()
            .zip(&self.warm_force)
            .zip(&self.warm_anchor)
            .enumerate()
        {
            if body != u32::MAX {
                forces.push(ContactForce {
                    node: i as u32,
                    body,
                    force,
                    anchor: anchor.is_finite().then_some(anchor),
                });
            }
        }
    }

    /// Broad phase for a substep spanning fractions `s0..s1` of the frame: which free nodes
    /// (moving from `x_start` toward `x_pred`) may touch which colliders, and which may reach
    /// the boundary of one of their [`ContactPass::limits`]. Each candidate starts from the
    /// force its node ended the last substep with against the same body (or limit). With
    /// `self_collision`, also the cloth's pairs against itself.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare(
        &mut self,
        colliders: &ColliderSet,
        settings: &ContactSettings,
        h: f64,
        s0: f64,
        s1: f64,
        free_nodes: &[u32],
        x_start: &[DVec3],
        x_pred: &[DVec3],
        self_collision: Option<SelfFrame<'_>>,
        exclusions: &BodyExclusions,
    ) {
        // The last substep's forces leave the sums (a node that was a candidate then may not
        // be one now).
        if !self.node_force.is_empty() {
            for c in &self.candidates {
                self.node_force[c.node as usize] = DVec3::ZERO;
            }
            self.self_contact.clear_forces(&mut self.node_force);
        }
        self.self_engaged = 0;
        // Before any return below: a substep that finds no body must not inherit the last
        // substep's (or another cloth's) measurement.
        self.response_set = 0;
        self.w_max = 0.0;
        match self_collision {
            Some(frame) => self.self_contact.prepare(&frame, x_start),
            None => self.self_contact.reset(),
        }
        self.candidates.clear();
        self.near.clear();
        self.bodies0.clear();
        self.bodies1.clear();
        self.swept.clear();
        self.touched.clear();
        self.last_contacts = 0;
        self.impacts = 0;
        self.max_push = settings.max_depenetration_speed * h;
        self.friction = settings.friction;
        if self.limit_warm.len() != self.limits.len() {
            // Another limit set (the settings or the pins changed): no warm start.
            self.limit_warm.clear();
            self.limit_warm.resize(self.limits.len(), 0.0);
        }
        if settings.enabled && !colliders.is_empty() {
            self.near_bodies(colliders, settings, s0, s1, free_nodes, x_start, x_pred);
        } else if self.limits.is_empty() {
            // Nothing to touch (with limits, `finish` records what touched them).
            self.was_touching.fill(false);
        }
        if self.near.is_empty() {
            self.warm_force.fill(DVec3::ZERO);
            self.warm_body.fill(u32::MAX);
            self.warm_anchor.fill(DVec3::NAN);
            if self.limits.is_empty() {
                return;
            }
        }
        let mut next_limit = 0;
        for &i in free_nodes {
            let (a, b) = (x_start[i as usize], x_pred[i as usize]);
            let slack = SLACK + a.distance(b);
            let limit_slack = LIMIT_SLACK + a.distance(b);
            if !self.near.is_empty() {
                self.body_candidates(i, a, b, slack, exclusions);
            }
            while next_limit < self.limits.len() && self.limits[next_limit].node <= i {
                let k = next_limit;
                next_limit += 1;
                let l = &self.limits[k];
                if l.node < i {
                    continue; // a limit on a pinned node
                }
                if !l.may_reach(a, b, limit_slack) && self.limit_warm[k] == 0.0 {
                    continue;
                }
                self.candidates.push(Candidate::new(
                    i,
                    k as u32,
                    true,
                    self.limit_warm[k] * l.gap(b).1,
                    (DVec3::ZERO, DVec3::ZERO, None, 0.0),
                ));
            }
        }
        self.sum_forces();
    }

    /// The bodies of the substep, and which come near the cloth (`near`).
    #[allow(clippy::too_many_arguments)]
    fn near_bodies(
        &mut self,
        colliders: &ColliderSet,
        settings: &ContactSettings,
        s0: f64,
        s1: f64,
        free_nodes: &[u32],
        x_start: &[DVec3],
        x_pred: &[DVec3],
    ) {
        let margin = settings.thickness + SLACK;
        let mut cloth = Aabb::EMPTY;
        for &i in free_nodes {
            cloth.grow(x_start[i as usize]);
            cloth.grow(x_pred[i as usize]);
        }
        let cloth = cloth.inflate(margin);
        for (c, e) in colliders.entries.iter().enumerate() {
            let (p0, p1) = (
                e.previous.interpolate(&e.current, s0),
                e.previous.interpolate(&e.current, s1),
            );
            self.bodies0
                .push(Body::new(&e.shape, p0, settings.thickness));
            self.bodies1
                .push(Body::new(&e.shape, p1, settings.thickness));
            self.swept
                .push(Swept::new(&e.shape, &p0, &p1, settings.thickness));
            if !e.removed
                && settings.groups.meets(e.groups)
                && Swept::new(&e.shape, &p0, &p1, margin).overlaps(&cloth)
            {
                self.near.push(c as u32);
            }
        }
    }

    /// Candidates of node `i` (moving from `a` toward `b`, tested within `slack` of its path)
    /// against the nearby bodies.
    fn body_candidates(
        &mut self,
        i: u32,
        a: DVec3,
        b: DVec3,
        slack: f64,
        exclusions: &BodyExclusions,
    ) {
        let node = Aabb {
            min: a.min(b) - DVec3::splat(slack),
            max: a.max(b) + DVec3::splat(slack),
        };
        for &c in &self.near {
            if self.swept[c as usize].overlaps(&node) && !exclusions.excludes(i, c) {
                let warm = self.warm_body[i as usize] == c;
                let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
                let p0 = b0.pose.inverse_transform_point(a);
                let force = if warm {
                    self.warm_force[i as usize]
                } else {
                    DVec3::ZERO
                };
                let (depth, clear) = b1.start_query(p0);
                let start = (p0, b1.pose.transform_point(p0), depth, clear);
                let mut candidate = Candidate::new(i, c, false, force, start);
                let anchor = self.warm_anchor[i as usize];
                if warm && anchor.is_finite() && anchor.distance(p0) < MAX_ANCHOR_SLIP {
                    candidate.anchor_local = anchor;
                    candidate.anchor = b1.pose.transform_point(anchor);
                }
                self.candidates.push(candidate);
            }
        }
    }

    /// `node_force` from the candidates' forces (the self-contact pairs' forces are added by
    /// [`ContactPass::update`]).
    fn sum_forces(&mut self) {
        for c in &self.candidates {
            self.node_force[c.node as usize] = DVec3::ZERO;
        }
        self.self_contact.clear_forces(&mut self.node_force);
        for c in &self.candidates {
            self.node_force[c.node as usize] += c.force;
        }
    }

    /// Saves the contact forces (candidates', self-contact pairs' and their node sums, at the
    /// nodes they touch), for an iteration that may have to go back to them
    /// ([`ContactPass::restore_forces`]). Reuses its buffers: allocates only while they grow.
    pub fn save_forces(&mut self) {
        self.saved_force.clear();
        self.saved_force
            .extend(self.candidates.iter().map(|c| c.force));
        self.saved_node_force.clear();
        let nodes = (self.candidates.iter().map(|c| c.node))
            .chain(self.self_contact.nodes(self.node_force.len()));
        self.saved_node_force
            .extend(nodes.map(|i| self.node_force[i as usize]));
        self.saved_limit_pushing = self.limit_pushing;
        self.self_contact.save_forces();
    }

    /// Puts back the forces of the last [`ContactPass::save_forces`] (the candidates are those
    /// of the same substep).
    pub fn restore_forces(&mut self) {
        for (c, &f) in self.candidates.iter_mut().zip(&self.saved_force) {
            c.force = f;
        }
        let nodes = (self.candidates.iter().map(|c| c.node))
            .chain(self.self_contact.nodes(self.node_force.len()));
        for (i, &f) in nodes.zip(&self.saved_node_force) {
            self.node_force[i as usize] = f;
        }
        self.limit_pushing = self.saved_limit_pushing;
        self.self_contact.restore_forces();
    }

    /// A key of the contact set at the last [`ContactPass::measure`]: which candidates were
    /// engaged, and how many self-contact pairs. Equal keys mean, but for a hash collision, the
    /// same set; an accelerated iteration clears its history when the key changes.
    pub fn contact_set_key(&self) -> u64 {
        // FNV-1a over the engaged candidates' indices.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (k, c) in self.candidates.iter().enumerate() {
            if c.engaged {
                h = (h ^ k as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
        (h ^ self.self_engaged as u64).wrapping_mul(0x0100_0000_01b3)
    }

    /// Whether any candidates or self-contact pairs exist this substep.
    pub fn active(&self) -> bool {
        !self.candidates.is_empty() || self.self_contact.active()
    }

    /// Whether a game constraint pushes its node (after the last [`ContactPass::update`]).
    pub fn limit_pushing(&self) -> bool {
        self.limit_pushing
    }

    /// Whether the substep has game constraints (the last pass then runs even without
    /// candidates, to keep every limit).
    pub fn has_limits(&self) -> bool {
        !self.limits.is_empty()
    }

    /// First half of a contact iteration at the iterate `x` (after a global solve): each
    /// candidate's gap and normal, and which candidates form the contact set (pushed or
    /// inside). Returns whether the set has changed enough since the collective compliance
    /// was last measured that it should be measured again ([`ContactPass::response_rhs`]).
    pub fn measure(&mut self, x: &[DVec3]) -> bool {
        let mut engaged = 0usize;
        for c in &mut self.candidates {
            let i = c.node as usize;
            if c.limit {
                (c.gap, c.normal) = self.limits[c.body as usize].gap(x[i]);
            } else if c.force == DVec3::ZERO && c.stays_clear(x[i]) {
                c.engaged = false;
                continue;
            } else {
                let b1 = &self.bodies1[c.body as usize];
                let p1 = b1.pose.inverse_transform_point(x[i]);
                let g = b1.gap_from(c.p0, c.start, p1, self.max_push);
                c.gap = g.gap;
                c.normal = b1.pose.transform_vector(g.normal);
                c.measured_at = x[i];
                c.clear = g.clear;
            }
            c.engaged = c.force != DVec3::ZERO || c.gap < 0.0;
            engaged += c.engaged as usize;
        }
        self.self_engaged = self.self_contact.measure(x);
        engaged += self.self_engaged;
        // Measured again when the set grew by a fifth (an impact spreading) or more.
        engaged > 0 && 5 * engaged > 6 * self.response_set
    }

    /// Right-hand side (node order, every node) of the solve that measures the collective
    /// compliance: 1 in the first lane of each engaged node (`rhs` comes in zeroed; the matrix
    /// acts alike on the three coordinates, so one lane is the scalar solve).
    pub fn response_rhs(&mut self, rhs: &mut [DVec3]) {
        let mut engaged = 0;
        for c in &self.candidates {
            if c.engaged {
                rhs[c.node as usize] = DVec3::X;
                engaged += 1;
            }
        }
        self.self_contact.response_rhs(rhs);
        self.response_set = engaged + self.self_engaged;
    }

    /// Takes the solve of [`ContactPass::response_rhs`], `u = K^-1 1_C` (node order, first
    /// lane): `u_i` is the sum of row `i` of `K^-1` over the contact set `C`. The Delassus
    /// operator of the contact, `N^T K^-1 N` (entries `(K^-1)_ij n_i . n_j`), has row sums of
    /// absolute values at most `u_i` wherever `K^-1` is non-negative, as it is to within
    /// rounding for the mass-dominated cloth matrix. Each engaged candidate's compliance becomes
    /// the larger of `u_i` and its own `(K^-1)_ii`. With a compliance at least the absolute row
    /// sum the projected Jacobi iteration on the contact forces converges (`2W - D` is
    /// diagonally dominant), whatever the signs of the coupling: on a plane all normals agree,
    /// around a thin bar they point apart, and pushing the top line lifts the wrapped sides.
    /// Measured (`docs/lab/2026-11-25-per-node-contact.md`): a unit push on every engaged node
    /// moves each by 25-60 times its own `(K^-1)_ii` on a sheet falling flat; the node's own
    /// compliance overshoots by that factor and throws the cloth, the signed row sum
    /// (`n_i . (K^-1 N 1)_i`) underestimates the coupling around a bar and diverges there.
    pub fn set_response(&mut self, u: &[DVec3], compliance: &[f64]) {
        self.w_max = 0.0;
        self.cache.clear();
        // The measured set has at most an entry per candidate: a list too small for them takes
        // the node count (or the candidates, if more) at once (see `store`).
        let bound = self.candidates.len();
        if bound > self.cache.nodes.capacity() {
            let bound = bound.max(u.len());
            self.cache.nodes.reserve_exact(bound);
            self.cache.compliance.reserve_exact(bound);
        }
        for c in &mut self.candidates {
            c.measured = c.engaged;
            if c.engaged {
                let i = c.node as usize;
                c.compliance = compliance[i].max(u[i].x);
                self.w_max = self.w_max.max(c.compliance);
                self.cache.nodes.push(c.node);
                self.cache.compliance.push(c.compliance);
            }
        }
        self.self_contact.set_response(u, compliance);
    }

    /// When the contact set differs from the one last measured (the [`ResponseCache`]) by at
    /// most `1 / REUSE_CHANGE` of that set (nodes that joined plus nodes that left), takes the compliances
    /// from it instead of solving again, and returns true; otherwise false, and the caller
    /// solves. A node still in the set keeps its measured compliance (a row sum over a set
    /// that has since lost a few nodes: slightly more than today's, which only slows its
    /// updates); a node that joined takes the largest measured one, as a node that joins within
    /// a substep does. The set is compared with the measured one, not the last reused one, so
    /// it cannot drift. A cloth resting on a body keeps nearly one contact set from substep to
    /// substep: measured on the 2,025-node cape trailing on the floor, reusing only an
    /// identical set still solved in 84 % of the substeps, reusing within 2 % in 12 %.
    pub fn reuse_response(&mut self) -> bool {
        let cached = &self.cache.nodes;
        if cached.is_empty() || self.self_engaged > 0 {
            return false;
        }
        // Both lists are in candidate order (ascending node, a node's bodies together).
        let (mut k, mut joined, mut common) = (0, 0, 0);
        for c in self.candidates.iter().filter(|c| c.engaged) {
            while k < cached.len() && cached[k] < c.node {
                k += 1;
            }
            if k < cached.len() && cached[k] == c.node {
                common += 1;
                k += 1;
            } else {
                joined += 1;
            }
        }
        let left = cached.len() - common;
        if REUSE_CHANGE * (joined + left) > cached.len() {
            return false;
        }
        self.response_set = cached.len();
        self.w_max = self.cache.compliance.iter().fold(0.0, |a, &w| a.max(w));
        let mut k = 0;
        for c in self.candidates.iter_mut().filter(|c| c.engaged) {
            while k < cached.len() && cached[k] < c.node {
                k += 1;
            }
            c.measured = k < cached.len() && cached[k] == c.node;
            if c.measured {
                c.compliance = self.cache.compliance[k];
                k += 1;
            }
        }
        true
    }

    /// Second half of a contact iteration: each candidate's force is corrected by what would
    /// close its node's gap and cancel its slip, the node's compliance telling how far a force
    /// moves it. The normal part stays pushing (`>= 0`); the tangential part, which opposes the
    /// node's slip relative to the body since the substep began, stays inside the Coulomb cone
    /// (`|r_t| <= mu r_n`: sticking inside, sliding on its edge). `node_force` then holds the
    /// new sums.
    ///
    /// The compliance is the larger of the node's own `(K^-1)_ii` and the collective one
    /// ([`ContactPass::set_response`]); a candidate that joined the contact set since that was
    /// measured takes the largest measured one. It doubles each time a correction carries its
    /// node across the surface (the gap changes sign while the body pushes): the iterations of
    /// the local-global and L-BFGS loops answer a push more softly than `K` alone (the local
    /// step follows the pushed node), by 2-3 times on the cape's back (measured: a lone node
    /// on a shoulder blade flipping between 0 and 60 N each iteration, gaps -1.8 / +2.9 mm).
    ///
    /// A limit ([`crate::limits`]) is frictionless: its force stays along its push.
    pub fn update(&mut self, x: &[DVec3], compliance: &[f64]) {
        self.limit_pushing = false;
        for c in &mut self.candidates {
            if !c.engaged {
                continue;
            }
            let i = c.node as usize;
            let mut w = c.compliance.max(compliance[i]);
            if !c.measured {
                w = w.max(self.w_max);
            }
            let n = c.normal;
            let rn = c.force.dot(n);
            let rt = c.force - rn * n;
            if c.prev_gap * c.gap < 0.0 && rn > 0.0 {
                c.overshoot = 2.0 * w.max(c.overshoot);
            }
            c.prev_gap = c.gap;
            let w = w.max(c.overshoot);
            if w <= 0.0 {
                continue;
            }
            let rn = (rn - c.gap / w).max(0.0);
            if c.limit {
                c.force = rn * n;
                self.limit_pushing |= rn > 0.0;
                continue;
            }
            let rt = cone(rt - c.slip(x[i]) / w, self.friction * rn);
            c.force = rn * n + rt;
        }
        self.sum_forces();
        self.self_contact
            .update(compliance, self.w_max, &mut self.node_force);
    }

    /// The coupled contact step's direction (see `solver::contact_step`), from the iterate `x`
    /// after [`ContactPass::measure`]: each engaged candidate's projected step
    /// `delta = P(r - u / w) - r`, where `u` is its gap along the normal plus its slip since the
    /// substep began (the contact problem's gradient), `w` its node's own compliance
    /// `(K^-1)_ii` and `P` the projection onto its Coulomb cone (a limit's: onto its push).
    /// The own compliance alone overshoots wherever nodes move together (25-60 times on a
    /// falling patch); the caller measures the step's response and scales it. Adds each node's
    /// summed step into `rhs` (node order, zeroed by the caller) and returns `sum delta . u`,
    /// negative for a step that lowers the contact problem's energy.
    pub fn propose(&mut self, x: &[DVec3], compliance: &[f64], rhs: &mut [DVec3]) -> f64 {
        let mut slope = 0.0;
        let mu = self.friction;
        for c in &mut self.candidates {
            c.step = DVec3::ZERO;
            if !c.engaged {
                continue;
            }
            let i = c.node as usize;
            let w = compliance[i];
            if w <= 0.0 {
                continue;
            }
            let n = c.normal;
            let rn = c.force.dot(n);
            let rt = c.force - rn * n;
            let rn_new = (rn - c.gap / w).max(0.0);
            let (new, u) = if c.limit {
                (rn_new * n, c.gap * n)
            } else {
                let slip = c.slip(x[i]);
                let t = cone(rt - slip / w, mu * rn_new);
                (rn_new * n + t, c.gap * n + slip)
            };
            c.step = new - c.force;
            slope += c.step.dot(u);
            rhs[i] += c.step;
        }
        slope
    }

    /// Takes the fraction `alpha` of the steps of [`ContactPass::propose`] (a convex
    /// combination of the forces and their projections for `alpha` in `[0, 1]`, so every force
    /// stays in its cone); `node_force` then holds the new sums.
    pub fn take_step(&mut self, alpha: f64) {
        self.limit_pushing = false;
        for c in &mut self.candidates {
            c.force += alpha * c.step;
            if c.limit {
                self.limit_pushing |= c.force != DVec3::ZERO;
            }
        }
        self.sum_forces();
    }

    /// Flags the nodes that the last projection put on a body or a limit.
    fn mark_held(&mut self, moved: &[bool]) {
        self.held.fill(false);
        for (c, &m) in self.candidates.iter().zip(moved) {
            self.held[c.node as usize] |= m;
        }
    }

    /// Puts every node outside one of its limits on it, candidate or not (the iterations can
    /// carry a node farther than the broad phase's allowance), flagging it in `held`. Returns
    /// whether any moved.
    fn clamp_limits(&mut self, x: &mut [DVec3]) -> bool {
        let mut any = false;
        for l in &self.limits {
            let i = l.node as usize;
            if let Some(q) = l.project(x[i]) {
                x[i] = q;
                self.held[i] = true;
                any = true;
            }
        }
        any
    }

    /// Puts every candidate node still inside its body on the surface: nodes on their own side
    /// go to the nearest surface point, nodes whose path crossed the body's middle go back to
    /// where they entered it (`Body::resolve`). Writes into `moved` which candidates moved.
    fn push_out_all(&self, x: &mut [DVec3], moved: &mut [bool]) {
        for (k, c) in self.candidates.iter().enumerate() {
            let i = c.node as usize;
            if c.limit {
                if let Some(q) = self.limits[c.body as usize].project(x[i]) {
                    x[i] = q;
                    moved[k] = true;
                }
                continue;
            }
            if c.stays_clear(x[i]) {
                continue;
            }
            let b1 = &self.bodies1[c.body as usize];
            let p0 = c.p0;
            let p1 = b1.pose.inverse_transform_point(x[i]);
            let g = b1.gap_from(p0, c.start, p1, self.max_push);
            if g.gap >= 0.0 {
                continue;
            }
            let q = if g.through {
                match b1.resolve(p0, p1, self.max_push) {
                    Some((q, _, _)) => q,
                    None => continue,
                }
            } else {
                p1 - g.gap * g.normal
            };
            x[i] = b1.pose.transform_point(q);
            moved[k] = true;
        }
    }

    /// The last pass of a substep, after the last iteration's force update: every node still
    /// inside a body goes on its surface (a small correction once the forces have converged),
    /// `restore` repairs the linear constraints around the moved nodes (flagged), nodes are
    /// pushed out once more, and a final guard runs over every free node whose actual path over
    /// the substep meets a nearby body's swept box (the iterations can carry a node farther
    /// than the broad phase's allowance), so that no node tunnels or stays inside. Records
    /// which nodes touch, and the forces to start the next substep from.
    pub fn finish(
        &mut self,
        x_start: &[DVec3],
        x: &mut [DVec3],
        free_nodes: &[u32],
        scratch_moved: &mut Vec<bool>,
        restore: impl FnOnce(&mut [DVec3], &[bool]),
    ) {
        scratch_moved.clear();
        scratch_moved.resize(self.candidates.len(), false);
        self.push_out_all(x, scratch_moved);
        self.mark_held(scratch_moved);
        // Without candidates (only limits, all slack at the broad phase) the linear constraints
        // are repaired only if a limit moved a node, so that slack limits change nothing.
        if self.clamp_limits(x) || self.active() {
            restore(x, &self.held);
            self.push_out_all(x, scratch_moved);
            self.clamp_limits(x);
        }
        self.touched.clear();
        self.impacts = 0;
        self.last_contacts = 0;
        self.limit_warm.fill(0.0);
        for (k, c) in self.candidates.iter().enumerate() {
            let i = c.node as usize;
            if c.limit {
                // A limit that stops a node is a contact with the limit's sphere: inelastic,
                // like a body's (else BDF2 throws the node back off it).
                let l = &self.limits[c.body as usize];
                self.limit_warm[c.body as usize] = c.force.length();
                let (gap, n) = l.gap(x[i]);
                if (c.force != DVec3::ZERO || scratch_moved[k]) && gap < TOUCH {
                    self.touched.push((c.node, n, l.moved));
                    if !self.was_touching[i] {
                        self.impacts += 1;
                    }
                }
                continue;
            }
            let (b0, b1) = (
                &self.bodies0[c.body as usize],
                &self.bodies1[c.body as usize],
            );
            let local = b1.pose.inverse_transform_point(x[i]);
            let pressed = c.force != DVec3::ZERO;
            let surface = (pressed || scratch_moved[k]).then(|| b1.surface(local));
            if let Some(Surface { normal: n, .. }) = surface.filter(|s| s.signed < TOUCH) {
                let moved = x[i] - b0.pose.transform_point(local);
                self.touched
                    .push((c.node, b1.pose.transform_vector(n), moved));
                self.last_contacts += 1;
                if !self.was_touching[i] {
                    self.impacts += 1;
                }
            }
        }
        self.was_touching.fill(false);
        for &(i, _, _) in &self.touched {
            self.was_touching[i as usize] = true;
        }
        // Warm start of the next substep: each node's strongest pushing contact, and where it
        // sticks if its friction force ended inside the cone.
        self.warm_body.fill(u32::MAX);
        self.warm_force.fill(DVec3::ZERO);
        self.warm_anchor.fill(DVec3::NAN);
        for c in self.candidates.iter().filter(|c| !c.limit) {
            let i = c.node as usize;
            if c.force != DVec3::ZERO
                && (self.warm_body[i] == u32::MAX
                    || c.force.length_squared() > self.warm_force[i].length_squared())
            {
                self.warm_body[i] = c.body;
                self.warm_force[i] = c.force;
                let rn = c.force.dot(c.normal);
                let rt = (c.force - rn * c.normal).length();
                let sticks = self.friction > 0.0 && rn > 0.0 && rt < STICK * self.friction * rn;
                self.warm_anchor[i] = if !sticks {
                    DVec3::NAN
                } else if c.anchor_local.is_finite() {
                    c.anchor_local
                } else {
                    self.bodies1[c.body as usize]
                        .pose
                        .inverse_transform_point(x[i])
                };
            }
        }
        // Guard: the actual paths against the swept boxes of the nearby bodies, but for the
        // candidates still within their clear radius (whose paths stay outside).
        self.clear_of.fill(u32::MAX);
        for c in self.candidates.iter().filter(|c| !c.limit) {
            if c.stays_clear(x[c.node as usize]) {
                self.clear_of[c.node as usize] = c.body;
            }
        }
        for &c in &self.near {
            let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
            let swept = &self.swept[c as usize];
            for &i in free_nodes {
                let i = i as usize;
                if self.clear_of[i] == c {
                    continue;
                }
                let (a, b) = (x_start[i], x[i]);
                let path = Aabb {
                    min: a.min(b),
                    max: a.max(b),
                };
                if !swept.overlaps(&path) {
                    continue;
                }
                let p0 = b0.pose.inverse_transform_point(a);
                let p1 = b1.pose.inverse_transform_point(b);
                if let Some((q, _, _)) = b1.resolve(p0, p1, self.max_push) {
                    x[i] = b1.pose.transform_point(q);
                }
            }
        }
    }

    /// Per node: touching a body after the last substep (of the cloth [`ContactPass::load`]ed).
    pub fn touching(&self) -> &[bool] {
        &self.was_touching
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plane's broad-phase region is its half-space grown by the margin, not an unbounded box:
    /// a node box more than the margin above the plane is left out, one that reaches into the
    /// layer is kept, and a plane tilted or moving over the substep keeps what either end pose
    /// reaches (to the exact margin, 1e-12 m).
    #[test]
    fn plane_broad_phase_keeps_only_boxes_near_its_half_space() {
        let b = |lo: [f64; 3], hi: [f64; 3]| Aabb {
            min: DVec3::from(lo),
            max: DVec3::from(hi),
        };
        let ground = Pose::from_translation(DVec3::new(0.0, 0.8, 0.0));
        let s = Swept::new(&ColliderShape::Plane, &ground, &ground, 0.03);
        assert!(!s.overlaps(&b([-1.0, 0.8301, -1.0], [1.0, 2.0, 1.0])));
        assert!(s.overlaps(&b([-1.0, 0.8299, -1.0], [1.0, 2.0, 1.0])));
        assert!(
            s.overlaps(&b([5.0, -3.0, 5.0], [6.0, -2.0, 6.0])),
            "below is inside"
        );
        // Tilted 90 degrees about z: the outward normal is -x; the region is x >= -margin.
        let wall = Pose::new(
            DVec3::ZERO,
            DQuat::from_rotation_z(std::f64::consts::FRAC_PI_2),
        );
        let s = Swept::new(&ColliderShape::Plane, &wall, &wall, 0.03);
        assert!(s.overlaps(&b([-0.0299, 0.0, 0.0], [-0.0299, 1.0, 1.0])));
        assert!(!s.overlaps(&b([-0.5, 0.0, 0.0], [-0.0301, 1.0, 1.0])));
        // Rising by 0.5 m over the substep: the end pose's layer counts.
        let risen = Pose::from_translation(DVec3::new(0.0, 1.3, 0.0));
        let s = Swept::new(&ColliderShape::Plane, &ground, &risen, 0.03);
        assert!(s.overlaps(&b([0.0, 1.3299, 0.0], [1.0, 2.0, 1.0])));
        assert!(!s.overlaps(&b([0.0, 1.3301, 0.0], [1.0, 2.0, 1.0])));
    }

    /// A candidate of node `node` against body 0, normal +Y, no force, measured nowhere.
    fn test_candidate(node: u32, engaged: bool) -> Candidate {
        Candidate {
            node,
            body: 0,
            limit: false,
            force: DVec3::ZERO,
            gap: 0.0,
            normal: DVec3::Y,
            engaged,
            compliance: 0.0,
            measured: false,
            prev_gap: f64::NAN,
            p0: DVec3::ZERO,
            anchor: DVec3::ZERO,
            anchor_local: DVec3::NAN,
            start: None,
            overshoot: 0.0,
            step: DVec3::ZERO,
            measured_at: DVec3::ZERO,
            clear: 0.0,
        }
    }

    /// An accelerated iteration that refuses a step goes back to the forces it saved: every
    /// candidate's force and the node sums are restored exactly, and the contact-set key tells
    /// one engaged set from another (and equal sets apart from nothing).
    #[test]
    fn saved_forces_come_back_exactly_and_the_set_key_follows_the_engaged_set() {
        let candidate = |node: u32, engaged: bool| Candidate {
            force: DVec3::new(0.0, node as f64, 0.0),
            ..test_candidate(node, engaged)
        };
        let mut pass = ContactPass {
            candidates: (0..4).map(|n| candidate(n, n % 2 == 0)).collect(),
            node_force: vec![DVec3::ZERO; 4],
            ..Default::default()
        };
        pass.sum_forces();
        let key = pass.contact_set_key();
        let (forces, sums): (Vec<DVec3>, Vec<DVec3>) = (
            pass.candidates.iter().map(|c| c.force).collect(),
            pass.node_force.clone(),
        );
        pass.save_forces();
        for c in &mut pass.candidates {
            c.step = DVec3::X;
        }
        pass.take_step(0.5);
        assert_ne!(pass.node_force, sums);
        pass.restore_forces();
        let after: Vec<DVec3> = pass.candidates.iter().map(|c| c.force).collect();
        assert_eq!(after, forces);
        assert_eq!(pass.node_force, sums);
        assert_eq!(pass.contact_set_key(), key);
        pass.candidates[1].engaged = true;
        assert_ne!(pass.contact_set_key(), key);
    }

    /// The collective compliance is taken from the cache when the contact set is the one measured
    /// or differs from it by at most 1/50 of it (joiners take the largest measured compliance,
    /// and are not marked measured), and is solved again beyond that.
    #[test]
    fn compliance_is_reused_only_while_the_contact_set_stays_within_a_fiftieth() {
        let candidate = test_candidate;
        let mut pass = ContactPass::default();
        assert!(!pass.reuse_response(), "nothing measured yet");
        pass.candidates = (0..100).map(|n| candidate(n, true)).collect();
        let u: Vec<DVec3> = (0..101).map(|n| DVec3::X * (1.0 + n as f64)).collect();
        pass.set_response(&u, &[0.0; 101]);
        // Same set: every compliance as measured.
        for c in &mut pass.candidates {
            c.compliance = 0.0;
        }
        assert!(pass.reuse_response());
        assert!(
            pass.candidates
                .iter()
                .all(|c| c.measured && c.compliance == 1.0 + c.node as f64)
        );
        // One node left and one joined: 2 changes in 100, reused; the joiner is unmeasured.
        pass.candidates[0].engaged = false;
        pass.candidates.push(candidate(100, true));
        assert!(pass.reuse_response());
        assert!(!pass.candidates[100].measured);
        assert_eq!(pass.w_max, 100.0);
        // A third change: measured again.
        pass.candidates[1].engaged = false;
        assert!(!pass.reuse_response());
    }

    fn capsule_body(thickness: f64) -> Body {
        Body::new(
            &ColliderShape::Capsule {
                half_height: 0.2,
                radius: 0.04,
            },
            Pose::IDENTITY,
            thickness,
        )
    }

    /// A point swept straight through a thin capsule in one step (relative motion 0.3 m across a
    /// 0.08 m body) is stopped on the side it came from, on the inflated surface (to 1e-5 m).
    #[test]
    fn segment_through_a_thin_capsule_stops_at_the_entry_side() {
        let body = capsule_body(0.005);
        let (q, n, depth) = body
            .resolve(DVec3::new(0.0, 0.0, -0.15), DVec3::new(0.0, 0.0, 0.15), 1.0)
            .unwrap();
        assert!(n.z < -0.99, "{n}");
        assert!((q.z + 0.045).abs() < 1e-5, "{q}");
        assert!((depth - 0.195).abs() < 1e-5, "{depth}");
    }

    /// A point that starts inside goes to the nearest surface point; a point that stays outside
    /// is left alone; the plane keeps points above its thickness.
    #[test]
    fn inside_points_go_to_the_nearest_surface_and_outside_points_stay() {
        let body = capsule_body(0.0);
        let (q, _, _) = body
            .resolve(DVec3::new(0.0, 0.1, 0.01), DVec3::new(0.0, 0.1, 0.02), 1.0)
            .unwrap();
        assert!((q - DVec3::new(0.0, 0.1, 0.04)).length() < 1e-6, "{q}");
        assert!(
            body.resolve(DVec3::new(0.1, 0.0, 0.0), DVec3::new(0.1, 0.05, 0.0), 1.0)
                .is_none()
        );
        let plane = Body::new(&ColliderShape::Plane, Pose::IDENTITY, 0.01);
        let (q, _, _) = plane
            .resolve(DVec3::new(0.0, 0.5, 0.0), DVec3::new(0.3, -0.5, 0.0), 1.0)
            .unwrap();
        assert!((q.y - 0.01).abs() < 1e-6 && (q.x - 0.3).abs() < 1e-6, "{q}");
    }

    /// A node that ended the last substep on the surface is, after the `f32` shape queries, as
    /// often just inside as just outside. Pushed 8 cm into a 0.1 m capsule by the solve, it
    /// must still be resolved along its path (back on its own side, outside to 1e-5 m) and
    /// not eased out at the depenetration speed like a node spawned inside. Before this was
    /// told apart, a frictionless sheet dropped on a capsule ended frames with nodes 3-6 cm
    /// inside it.
    #[test]
    fn a_node_resting_on_the_surface_is_not_treated_as_spawned_inside() {
        let body = Body::new(
            &ColliderShape::Capsule {
                half_height: 0.4,
                radius: 0.1,
            },
            Pose::IDENTITY,
            0.0,
        );
        let max_push = 0.008;
        for eps in [-1e-9, -1e-8, 0.0, 1e-8] {
            let p0 = DVec3::new(0.0, 0.0, 0.1 + eps);
            let p1 = DVec3::new(0.01, 0.0, 0.02);
            let (q, n, _) = body.resolve(p0, p1, max_push).unwrap();
            // On the tangent plane at the entry point, outside the body, on its own side.
            let r = q.x.hypot(q.z);
            assert!(r > 0.1 - 1e-5 && r < 0.101 && q.z > 0.09, "eps {eps}: {q}");
            assert!(n.z > 0.99, "eps {eps}: {n}");
        }
        // Really inside (1 cm deep): eased out by at most `max_push`.
        let (q, _, moved) = body
            .resolve(
                DVec3::new(0.0, 0.0, 0.09),
                DVec3::new(0.0, 0.0, 0.02),
                max_push,
            )
            .unwrap();
        assert!(
            (moved - max_push).abs() < 1e-9 && (q.z - 0.028).abs() < 1e-9,
            "{q}"
        );
    }

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

    /// Bodies of every kind for the query tests: plane, capsule, box, tapered capsule, a
    /// convex hull and a closed mesh (a box's 12 triangles), posed off the origin.
    fn test_bodies(thickness: f64) -> Vec<Body> {
        let corners: Vec<DVec3> = (0..8)
            .map(|k| {
                DVec3::new(
                    if k & 1 == 0 { -0.2 } else { 0.3 },
                    if k & 2 == 0 { -0.1 } else { 0.15 },
                    if k & 4 == 0 { -0.25 } else { 0.2 },
                )
            })
            .collect();
        let quads = [
            [0, 2, 3, 1],
            [4, 5, 7, 6],
            [0, 1, 5, 4],
            [2, 6, 7, 3],
            [0, 4, 6, 2],
            [1, 3, 7, 5],
        ];
        let triangles: Vec<[u32; 3]> = quads
            .iter()
            .flat_map(|q| [[q[0], q[1], q[2]], [q[0], q[2], q[3]]])
            .collect();
        let shapes = [
            ColliderShape::Plane,
            ColliderShape::Capsule {
                half_height: 0.2,
                radius: 0.1,
            },
            ColliderShape::Cuboid {
                half_extents: DVec3::new(0.2, 0.1, 0.3),
            },
            ColliderShape::TaperedCapsule {
                half_height: 0.2,
                bottom_radius: 0.15,
                top_radius: 0.05,
            },
            ColliderShape::ConvexHull(Arc::new(
                ConvexHull::new(corners.clone()).expect("box hull"),
            )),
            ColliderShape::TriMesh(Arc::new(
                TriangleMesh::new(corners, triangles).expect("box mesh"),
            )),
        ];
        let pose = Pose::new(DVec3::new(0.1, 0.9, -0.2), DQuat::from_rotation_x(0.3));
        shapes
            .iter()
            .map(|s| Body::new(s, pose, thickness))
            .collect()
    }

    /// A small deterministic generator of points in a cube of half size `r` around `c`.
    fn scatter(seed: &mut u64, c: DVec3, r: f64) -> DVec3 {
        let mut next = || {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (*seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        c + r * DVec3::new(next(), next(), next())
    }

    /// [`Gap::clear`] is what lets an unpushed candidate skip its query: anywhere within it of
    /// where the gap was measured, the gap is positive and the path from the start does not
    /// cross the body, for every kind of body and for starts outside and inside (checked at
    /// 20 points on the clear sphere of each of 400 node paths a body).
    #[test]
    fn within_the_clear_radius_the_gap_stays_positive_and_the_path_outside() {
        let mut seed = 7;
        for body in test_bodies(0.01) {
            let centre = body.pose.transform_point(DVec3::ZERO);
            let mut cleared = 0;
            for _ in 0..400 {
                let p0 = body
                    .pose
                    .inverse_transform_point(scatter(&mut seed, centre, 0.6));
                let p1 = scatter(&mut seed, p0, 0.1);
                let start = body.start_depth(p0);
                let g = body.gap_from(p0, start, p1, 0.001);
                if g.clear <= 0.0 {
                    continue;
                }
                assert!(g.gap > 0.0 && !g.through);
                cleared += 1;
                for _ in 0..20 {
                    let d = scatter(&mut seed, DVec3::ZERO, 1.0).normalize_or(DVec3::X);
                    let p = p1 + 0.999 * g.clear * d;
                    let h = body.gap_from(p0, start, p, 0.001);
                    assert!(
                        h.gap > 0.0 && !h.through,
                        "{:?}: gap {} at {p:?} within {} of {p1:?}",
                        body.shape,
                        h.gap,
                        g.clear
                    );
                    assert_eq!(body.resolve(p0, p, 0.001), None);
                }
            }
            assert!(
                cleared > 100,
                "{:?}: only {cleared} paths cleared",
                body.shape
            );
        }
    }

    /// [`Body::start_query`]'s radius holds around the start itself: a node that moves less
    /// than it from where it started (carried with the body) has a positive gap and no
    /// crossing; nodes that start inside get none.
    #[test]
    fn the_start_radius_bounds_the_first_iterations() {
        let mut seed = 11;
        for body in test_bodies(0.01) {
            let centre = body.pose.transform_point(DVec3::ZERO);
            for _ in 0..400 {
                let p0 = body
                    .pose
                    .inverse_transform_point(scatter(&mut seed, centre, 0.6));
                let (start, clear) = body.start_query(p0);
                assert_eq!(start, body.start_depth(p0));
                if clear <= 0.0 {
                    continue;
                }
                assert!(start.is_none() && body.signed_distance(p0) > 2.0 * clear);
                for _ in 0..20 {
                    let d = scatter(&mut seed, DVec3::ZERO, 1.0).normalize_or(DVec3::X);
                    let g = body.gap_from(p0, start, p0 + 0.999 * clear * d, 0.001);
                    assert!(g.gap > 0.0 && !g.through);
                }
            }
        }
    }

    /// A mesh's query answers alike whatever triangle the previous query left as its hint:
    /// the same points queried in two orders (and after a far-away query) give bit-identical
    /// nearest points, normals and distances.
    #[test]
    fn mesh_queries_do_not_depend_on_the_previous_query() {
        let mesh = test_bodies(0.01).pop().expect("the mesh body");
        let mut seed = 3;
        let points: Vec<DVec3> = (0..300)
            .map(|_| scatter(&mut seed, DVec3::ZERO, 0.5))
            .collect();
        let forward: Vec<_> = points
            .iter()
            .map(|&p| {
                let s = mesh.surface(p);
                (s.point, s.normal, s.signed)
            })
            .collect();
        for (k, &p) in points.iter().enumerate().rev() {
            mesh.surface(DVec3::new(40.0, -30.0, 25.0));
            let s = mesh.surface(p);
            assert_eq!((s.point, s.normal, s.signed), forward[k], "point {p:?}");
        }
    }
}
