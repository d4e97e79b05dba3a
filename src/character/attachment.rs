//! Cloth hung from a character's bones: pinned nodes follow bone poses, rigidly or skinned.
//!
//! [`Attachments::bind`] records, for every attached node, its offset in the frame of each bone
//! that influences it, at the bind pose. Each frame [`Attachments::apply`] takes the bones'
//! current poses, blends the offsets (linear blend skinning: `sum_b w_b pose_b * offset_b`,
//! the same rule the character's own skinned mesh follows) and hands the result to the cloth as
//! end-of-frame pin targets, which the cloth interpolates across its substeps.
//!
//! The same call handles what games do to characters, measured on an *anchor* bone (the root,
//! usually): a jump of the anchor farther than [`AttachmentSettings::teleport_distance`] in one
//! frame carries the cloth along rigidly ([`Cloth::teleport`]) instead of flinging it, and the
//! inertia scales carry a fraction of the anchor's ordinary motion the same way, so that the
//! cloth only feels the rest of it (simulation partly in the character's frame).

use glam::{DAffine3, DVec3};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cloth::Cloth;
use crate::collision::Pose;
use crate::error::ClothError;

/// How the anchor bone's motion reaches the cloth. Plain data with documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttachmentSettings {
    /// Fraction of the anchor's linear motion the cloth feels as inertia, in [0, 1]. At 1 (the
    /// default) the cloth is fully simulated in the world; at 0 it is carried with the anchor's
    /// translation and only feels gravity, wind and its pins' motion relative to the anchor.
    pub linear_inertia: f64,
    /// Fraction of the anchor's rotation the cloth feels, in [0, 1] (default 1). Lower it for a
    /// spinning character so that its cape is not whipped off.
    pub angular_inertia: f64,
    /// Anchor displacement in one frame (metres) beyond which the cloth is teleported with the
    /// character instead of simulated across the gap. Default 1 m (60 m/s at 60 Hz).
    pub teleport_distance: f64,
    /// Rings of nodes around the attached ones that the bodies of their own bones do not push
    /// where those bodies already hold them (inside the contact layer where the pins put them;
    /// [`Attachments::body_exclusions`]; the ECS layer and the Bevy plugin apply it): a collar
    /// or neck capsule around the nodes pinned to that bone would push them against their
    /// pins and stretch the row beside them. Each ring is the nodes sharing a render triangle
    /// with the last (the attached nodes' neighbours at 1). 0 turns it off. Default 1.
    #[serde(default = "one")]
    pub unpushed_rings: u32,
    /// The pins move as one rigid piece: each frame the row turns by the blend of its bones'
    /// rotations since bind (weighted by their share of the pins; normalised) about the skinned
    /// targets' centroid, so that bones blending differently along a pinned row (a collar on
    /// the neck and both shoulders) turn and move it without stretching or squeezing it. For a
    /// collar or a banner's pole, not for a waistband that should follow a twisting pelvis
    /// and thighs.
    /// Default false.
    #[serde(default)]
    pub rigid_pins: bool,
}

fn one() -> u32 {
    1
}

impl Default for AttachmentSettings {
    fn default() -> Self {
        Self {
            linear_inertia: 1.0,
            angular_inertia: 1.0,
            teleport_distance: 1.0,
            unpushed_rings: 1,
            rigid_pins: false,
        }
    }
}

impl AttachmentSettings {
    /// Checks ranges.
    pub fn validate(&self) -> Result<(), AttachError> {
        let unit = |v: f64| v.is_finite() && (0.0..=1.0).contains(&v);
        if !unit(self.linear_inertia) || !unit(self.angular_inertia) {
            return Err(AttachError::BadSetting {
                name: "inertia",
                reason: format!(
                    "inertia scales must be in [0, 1], got {} and {}",
                    self.linear_inertia, self.angular_inertia
                ),
            });
        }
        if !(self.teleport_distance.is_finite() && self.teleport_distance > 0.0) {
            return Err(AttachError::BadSetting {
                name: "teleport_distance",
                reason: format!(
                    "must be finite and positive, got {}",
                    self.teleport_distance
                ),
            });
        }
        Ok(())
    }
}

/// One bone's share of an attached node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Influence {
    /// Index of the bone in the pose slices passed to [`Attachments::bind`] and
    /// [`Attachments::apply`].
    pub bone: u32,
    /// Skin weight (> 0); the weights of one node are normalised to sum to 1.
    pub weight: f64,
}

/// Bad attachment data.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum AttachError {
    /// A node index past the cloth's nodes.
    #[error("attached node {node} does not exist (the cloth has {count} nodes)")]
    NoSuchNode {
        /// The node.
        node: u32,
        /// Node count.
        count: usize,
    },
    /// The same node attached twice.
    #[error("node {node} is attached twice")]
    RepeatedNode {
        /// The node.
        node: u32,
    },
    /// A bone index past the poses given.
    #[error("node {node} refers to bone {bone}, but there are {count} bones")]
    NoSuchBone {
        /// The node.
        node: u32,
        /// The bone.
        bone: u32,
        /// Bone count.
        count: usize,
    },
    /// A node without influences, or with weights that are not finite and positive.
    #[error("node {node} needs at least one influence with a finite positive weight")]
    BadWeights {
        /// The node.
        node: u32,
    },
    /// A bone pose with NaN, infinity or a non-unit rotation.
    #[error("bone {bone} has a non-finite or non-unit pose")]
    BadPose {
        /// The bone.
        bone: usize,
    },
    /// Pose slice of the wrong length.
    #[error("expected {expected} bone poses, got {found}")]
    PoseCount {
        /// Bones bound.
        expected: usize,
        /// Poses given.
        found: usize,
    },
    /// A skin ([`Attachments::with_skin`]) that leaves a node out.
    #[error("the skin leaves node {node} out (every node needs influences)")]
    NotSkinned {
        /// The first node left out.
        node: u32,
    },
    /// A setting out of range.
    #[error("attachment setting {name}: {reason}")]
    BadSetting {
        /// The setting.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// The cloth refused the result (its pins are not the attached nodes).
    #[error(transparent)]
    Cloth(#[from] ClothError),
}

/// Linear blend skinning of some of a cloth's nodes: each node's offset in the frame of each
/// bone that influences it, at bind time.
#[derive(Debug, Clone, Default)]
struct Skin {
    /// Skinned nodes, sorted.
    nodes: Vec<u32>,
    /// `ranges[k]..ranges[k + 1]`: the influences of `nodes[k]`.
    ranges: Vec<u32>,
    bones: Vec<u32>,
    weights: Vec<f64>,
    /// Node position in the bone's frame at bind time.
    offsets: Vec<DVec3>,
}

impl Skin {
    /// Binds `nodes` (each with its influences) at positions `x` and `bind_poses` (checked).
    fn bind(
        x: &[DVec3],
        nodes: &[(u32, Vec<Influence>)],
        bind_poses: &[Pose],
    ) -> Result<Self, AttachError> {
        let bone_count = bind_poses.len();
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by_key(|&k| nodes[k].0);
        let mut out = Self {
            nodes: Vec::with_capacity(nodes.len()),
            ranges: vec![0],
            ..Self::default()
        };
        for k in order {
            let (node, influences) = &nodes[k];
            let node = *node;
            if node as usize >= x.len() {
                return Err(AttachError::NoSuchNode {
                    node,
                    count: x.len(),
                });
            }
            if out.nodes.last() == Some(&node) {
                return Err(AttachError::RepeatedNode { node });
            }
            let total: f64 = influences.iter().map(|i| i.weight).sum();
            if influences.is_empty()
                || influences
                    .iter()
                    .any(|i| !(i.weight.is_finite() && i.weight > 0.0))
                || !(total.is_finite() && total > 0.0)
            {
                return Err(AttachError::BadWeights { node });
            }
            for inf in influences {
                if inf.bone as usize >= bone_count {
                    return Err(AttachError::NoSuchBone {
                        node,
                        bone: inf.bone,
                        count: bone_count,
                    });
                }
                out.bones.push(inf.bone);
                out.weights.push(inf.weight / total);
                out.offsets
                    .push(bind_poses[inf.bone as usize].inverse_transform_point(x[node as usize]));
            }
            out.nodes.push(node);
            out.ranges.push(out.bones.len() as u32);
        }
        Ok(out)
    }

    /// The skinned position of every node for the bones' `frames` (`poses` as matrices: a
    /// matrix-vector product per influence where a quaternion rotation costs about three
    /// times that), in node order, into `out`.
    fn evaluate(&self, frames: &[DAffine3], out: &mut Vec<DVec3>) {
        out.clear();
        for k in 0..self.nodes.len() {
            let (s, e) = (self.ranges[k] as usize, self.ranges[k + 1] as usize);
            let mut t = DVec3::ZERO;
            for j in s..e {
                t += self.weights[j]
                    * frames[self.bones[j] as usize].transform_point3(self.offsets[j]);
            }
            out.push(t);
        }
    }
}

/// The second moments of a [`Skin`] by bone pair: what the skin's best rigid motion between
/// two sets of bone poses needs ([`SkinMoments::motion`]), whatever the node count. With
/// `a_i = sum_j w_ij (R_j o_ij + t_j)` the skinned node, `sum_i a_i` and `sum_i a_i b_i^T`
/// (`b` the skin at other poses) expand into the bones' rotations and translations against
/// sums over the nodes fixed at bind: per bone `sum w o` and `sum w`, per bone pair
/// `sum w w' o o'^T`, `sum w w' o`, `sum w w' o'` and `sum w w'`.
#[derive(Debug, Clone, Default)]
struct SkinMoments {
    nodes: usize,
    /// Per bone: `(bone, sum w o, sum w)`.
    first: Vec<(u32, DVec3, f64)>,
    /// Per bone pair `(p, q)`: `sum w_p w_q o_p o_q^T`, `sum w_p w_q o_p`, `sum w_p w_q o_q`,
    /// `sum w_p w_q`.
    second: Vec<((u32, u32), PairMoments)>,
}

/// One bone pair's sums in [`SkinMoments`].
type PairMoments = (glam::DMat3, DVec3, DVec3, f64);

impl SkinMoments {
    fn of(skin: &Skin) -> Self {
        use std::collections::BTreeMap;
        let mut first: BTreeMap<u32, (DVec3, f64)> = BTreeMap::new();
        let mut second: BTreeMap<(u32, u32), PairMoments> = BTreeMap::new();
        for k in 0..skin.nodes.len() {
            let (s, e) = (skin.ranges[k] as usize, skin.ranges[k + 1] as usize);
            for j in s..e {
                let (wj, oj) = (skin.weights[j], skin.offsets[j]);
                let f = first.entry(skin.bones[j]).or_default();
                f.0 += wj * oj;
                f.1 += wj;
                for l in s..e {
                    let (wl, ol) = (skin.weights[l], skin.offsets[l]);
                    let w = wj * wl;
                    let m = second.entry((skin.bones[j], skin.bones[l])).or_insert((
                        glam::DMat3::ZERO,
                        DVec3::ZERO,
                        DVec3::ZERO,
                        0.0,
                    ));
                    m.0 +=
                        glam::DMat3::from_cols(oj * (w * ol.x), oj * (w * ol.y), oj * (w * ol.z));
                    m.1 += w * oj;
                    m.2 += w * ol;
                    m.3 += w;
                }
            }
        }
        Self {
            nodes: skin.nodes.len(),
            first: first.into_iter().map(|(b, (m, w))| (b, m, w)).collect(),
            second: second.into_iter().collect(),
        }
    }

    /// The rigid motion that best carries the skin at the bones' frames `from` onto the skin at
    /// `to` (least squares over every node, as [`crate::Cloth::follow_skin`] fits the targets),
    /// the sums taken about the bones `anchor`'s positions (so that they stay the size of the
    /// character, not of its distance from the origin).
    fn motion(
        &self,
        from: &[DAffine3],
        to: &[DAffine3],
        anchor: usize,
    ) -> (glam::DQuat, DVec3, DVec3) {
        if self.nodes == 0 {
            return (glam::DQuat::IDENTITY, DVec3::ZERO, DVec3::ZERO);
        }
        let (ca, cb) = (from[anchor].translation, to[anchor].translation);
        let (mut sa, mut sb) = (DVec3::ZERO, DVec3::ZERO);
        for &(b, m, w) in &self.first {
            let (fa, fb) = (&from[b as usize], &to[b as usize]);
            sa += fa.matrix3 * m + (fa.translation - ca) * w;
            sb += fb.matrix3 * m + (fb.translation - cb) * w;
        }
        let outer = |u: DVec3, v: DVec3| glam::DMat3::from_cols(u * v.x, u * v.y, u * v.z);
        let mut h = glam::DMat3::ZERO;
        for &((p, q), (m, u, v, c)) in &self.second {
            let (fp, fq) = (&from[p as usize], &to[q as usize]);
            let (tp, tq) = (fp.translation - ca, fq.translation - cb);
            h += fp.matrix3 * m * fq.matrix3.transpose()
                + outer(fp.matrix3 * u, tq)
                + outer(tp, fq.matrix3 * v)
                + outer(tp * c, tq);
        }
        let n = self.nodes as f64;
        h -= outer(sa, sb / n);
        let s = [0, 1, 2].map(|i| [0, 1, 2].map(|j| h.col(j)[i]));
        (crate::cloth::fit_rotation(s), ca + sa / n, cb + sb / n)
    }
}

/// How much of its skin a cloth needs this frame ([`Attachments::apply_using`]). Skinning
/// every node every frame is most of a far cloth's cost: on `crowd`, 64 capes of 777 nodes,
/// the skin and its rigid fit were a quarter of the tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SkinUse {
    /// Every node's skinned position ([`Cloth::set_skin_targets`]): what
    /// [`Attachments::apply`] gives.
    #[default]
    Every,
    /// Every node's where the cloth's limits read the skin
    /// ([`crate::LimitSettings::uses_skin`]: max distance, backstops), else none: a simulated
    /// cloth.
    Limits,
    /// The skin's rigid motion over the frame only ([`Cloth::set_skin_motion`]), computed from
    /// the bones whatever the node count: a cloth following its skin
    /// ([`Cloth::follow_skin`] with blend 0, the level of detail's
    /// [`crate::lod::Rung::FollowSkin`]; a blend above 0 reads every node's target: use
    /// `Every`).
    Motion,
    /// None: a cloth that does not move this frame ([`crate::lod::Rung::Sleep`]).
    Nothing,
}

/// Attached nodes, their bind-time offsets per bone, and the anchor's last pose; optionally
/// the skinning of every node (for max distance and backstops, [`crate::limits`]).
#[derive(Debug, Clone)]
pub struct Attachments {
    /// The attached nodes (the cloth's pin order).
    pins: Skin,
    /// Every node of the cloth, if skinned ([`Attachments::with_skin`]).
    skin: Option<Skin>,
    /// The skin's moments ([`SkinUse::Motion`]).
    moments: SkinMoments,
    /// The bones' frames at the last apply (the start of the skin's motion), carried with the
    /// cloth's teleports and inertia carry.
    last_frames: Vec<DAffine3>,
    /// Whether the last apply gave the cloth every node's skin target.
    targets_given: bool,
    bone_count: usize,
    anchor: u32,
    last_anchor: Option<Pose>,
    settings: AttachmentSettings,
    targets: Vec<DVec3>,
    skin_targets: Vec<DVec3>,
    /// The bones' poses of the last [`Attachments::targets`] as matrices (scratch).
    frames: Vec<DAffine3>,
    /// The attached nodes' positions at bind time, their centroid, each bone's share of the
    /// pins' weights and its rotation at bind ([`AttachmentSettings::rigid_pins`]).
    bind_positions: Vec<DVec3>,
    bind_centroid: DVec3,
    bone_shares: Vec<f64>,
    bind_rotations: Vec<glam::DQuat>,
}

fn check_poses(poses: &[Pose], expected: usize) -> Result<(), AttachError> {
    if poses.len() != expected {
        return Err(AttachError::PoseCount {
            expected,
            found: poses.len(),
        });
    }
    match poses.iter().position(|p| !p.is_valid()) {
        Some(bone) => Err(AttachError::BadPose { bone }),
        None => Ok(()),
    }
}

impl Attachments {
    /// Binds `nodes` of `cloth` (each with its bone influences) at the cloth's current positions
    /// and the bones' `bind_poses`. `anchor` is the bone whose motion decides teleports and
    /// inertia scaling (the root). Every check happens here; nothing is bound on error.
    pub fn bind(
        cloth: &Cloth,
        nodes: &[(u32, Vec<Influence>)],
        bind_poses: &[Pose],
        anchor: u32,
        settings: AttachmentSettings,
    ) -> Result<Self, AttachError> {
        settings.validate()?;
        let bone_count = bind_poses.len();
        check_poses(bind_poses, bone_count)?;
        if anchor as usize >= bone_count {
            return Err(AttachError::NoSuchBone {
                node: u32::MAX,
                bone: anchor,
                count: bone_count,
            });
        }
        let pins = Skin::bind(cloth.positions(), nodes, bind_poses)?;
        let bind_positions: Vec<DVec3> = pins
            .nodes
            .iter()
            .map(|&n| cloth.positions()[n as usize])
            .collect();
        let bind_centroid =
            bind_positions.iter().sum::<DVec3>() / bind_positions.len().max(1) as f64;
        let mut bone_shares = vec![0.0; bone_count];
        for (&b, &w) in pins.bones.iter().zip(&pins.weights) {
            bone_shares[b as usize] += w;
        }
        Ok(Self {
            bind_positions,
            bind_centroid,
            bone_shares,
            bind_rotations: bind_poses.iter().map(|p| p.rotation).collect(),
            targets: Vec::with_capacity(pins.nodes.len()),
            pins,
            skin: None,
            moments: SkinMoments::default(),
            last_frames: bind_poses
                .iter()
                .map(|p| DAffine3::from_rotation_translation(p.rotation, p.translation))
                .collect(),
            // The first apply interpolates from whatever skin the cloth holds, as it always
            // did; only a skin given again after frames without one starts on its pose.
            targets_given: true,
            bone_count,
            anchor,
            last_anchor: Some(bind_poses[anchor as usize]),
            settings,
            skin_targets: Vec::new(),
            frames: Vec::with_capacity(bone_count),
        })
    }

    /// Also skins every node of `cloth` (each with its influences, at the cloth's current
    /// positions and the bones' `bind_poses`, which should be those of [`Attachments::bind`]):
    /// from then on [`Attachments::apply`] hands the cloth its skinned pose each frame
    /// ([`Cloth::set_skin_targets`]), which max distance and backstops are measured from. Every
    /// node must be listed once.
    pub fn with_skin(
        mut self,
        cloth: &Cloth,
        nodes: &[(u32, Vec<Influence>)],
        bind_poses: &[Pose],
    ) -> Result<Self, AttachError> {
        check_poses(bind_poses, self.bone_count)?;
        let skin = Skin::bind(cloth.positions(), nodes, bind_poses)?;
        let count = cloth.positions().len();
        if let Some(missing) = (0..count as u32).find(|&i| skin.nodes.get(i as usize) != Some(&i)) {
            return Err(AttachError::NotSkinned { node: missing });
        }
        self.skin_targets = Vec::with_capacity(count);
        self.moments = SkinMoments::of(&skin);
        self.skin = Some(skin);
        Ok(self)
    }

    /// Attached nodes, sorted: the pin set the cloth needs ([`Cloth::set_pins`]).
    pub fn nodes(&self) -> &[u32] {
        &self.pins.nodes
    }

    /// The skinned position of every node at the last [`Attachments::apply`] (empty without
    /// [`Attachments::with_skin`]).
    pub fn skin_targets(&self) -> &[DVec3] {
        &self.skin_targets
    }

    /// The settings in force.
    pub fn settings(&self) -> &AttachmentSettings {
        &self.settings
    }

    /// Changes the settings (validated).
    pub fn set_settings(&mut self, settings: AttachmentSettings) -> Result<(), AttachError> {
        settings.validate()?;
        self.settings = settings;
        Ok(())
    }

    /// Which bodies do not push which nodes: the attached nodes and
    /// [`AttachmentSettings::unpushed_rings`] rings of nodes around them, each against the
    /// bodies of the bones that hold the attached nodes it is near (`bodies_of(bone)`: the
    /// colliders carried by bone `bone`) **that already hold it** where the pins put it
    /// (`overlaps(node, collider)`: the node inside the body's contact layer now). A body the
    /// pinned row sits clear of still pushes it when it comes (a leaning chest): that is
    /// contact, not a fight with the pins. For [`Cloth::set_body_exclusions`]. Allocates: call
    /// it when the bodies or the pins change, not every frame.
    pub fn body_exclusions(
        &self,
        cloth: &Cloth,
        mut bodies_of: impl FnMut(u32) -> Vec<crate::collision::ColliderId>,
        mut overlaps: impl FnMut(u32, crate::collision::ColliderId) -> bool,
    ) -> Result<crate::collision::BodyExclusions, ClothError> {
        let n = cloth.positions().len();
        let rings = self.settings.unpushed_rings;
        if rings == 0 || self.pins.nodes.is_empty() {
            return Ok(crate::collision::BodyExclusions::default());
        }
        // Node adjacency through render triangles.
        let tris = cloth.model().mesh().render_triangles();
        let mut degree = vec![0u32; n + 1];
        for t in tris {
            for &v in t {
                degree[v as usize + 1] += 2;
            }
        }
        for i in 0..n {
            degree[i + 1] += degree[i];
        }
        let mut fill = degree.clone();
        let mut adjacent = vec![0u32; degree[n] as usize];
        for t in tris {
            for k in 0..3 {
                let v = t[k] as usize;
                for j in [t[(k + 1) % 3], t[(k + 2) % 3]] {
                    adjacent[fill[v] as usize] = j;
                    fill[v] += 1;
                }
            }
        }
        // Each node's bones: the attached nodes' own, spread ring by ring.
        let mut bones: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut front: Vec<u32> = Vec::new();
        for (k, &node) in self.pins.nodes.iter().enumerate() {
            let (s, e) = (
                self.pins.ranges[k] as usize,
                self.pins.ranges[k + 1] as usize,
            );
            bones[node as usize].extend_from_slice(&self.pins.bones[s..e]);
            front.push(node);
        }
        let mut reached = vec![false; n];
        for &node in &front {
            reached[node as usize] = true;
        }
        for _ in 0..rings {
            let mut next = Vec::new();
            for &v in &front {
                let from = bones[v as usize].clone();
                for &j in &adjacent[degree[v as usize] as usize..degree[v as usize + 1] as usize] {
                    let j = j as usize;
                    if !reached[j] || next.contains(&(j as u32)) {
                        for &b in &from {
                            if !bones[j].contains(&b) {
                                bones[j].push(b);
                            }
                        }
                        if !reached[j] {
                            reached[j] = true;
                            next.push(j as u32);
                        }
                    }
                }
            }
            front = next;
        }
        let mut per_bone: Vec<Option<Vec<crate::collision::ColliderId>>> =
            vec![None; self.bone_count];
        let mut pairs = Vec::new();
        for (node, list) in bones.iter().enumerate() {
            for &b in list {
                let bodies = per_bone[b as usize].get_or_insert_with(|| bodies_of(b));
                for &c in bodies.iter() {
                    if overlaps(node as u32, c) {
                        pairs.push((node as u32, c));
                    }
                }
            }
        }
        crate::collision::BodyExclusions::new(n, pairs)
    }

    /// Skinned target of every attached node for `poses`, in [`Attachments::nodes`] order.
    pub fn targets(&mut self, poses: &[Pose]) -> Result<&[DVec3], AttachError> {
        check_poses(poses, self.bone_count)?;
        self.frames.clear();
        self.frames.extend(
            poses
                .iter()
                .map(|p| DAffine3::from_rotation_translation(p.rotation, p.translation)),
        );
        self.pins.evaluate(&self.frames, &mut self.targets);
        if self.settings.rigid_pins && !self.targets.is_empty() {
            // The bones' rotations since bind, blended by their share (signs aligned to the
            // largest share's, so that q and -q do not cancel).
            let turn = |b: usize| poses[b].rotation * self.bind_rotations[b].inverse();
            let lead = (0..self.bone_shares.len())
                .max_by(|&a, &b| self.bone_shares[a].total_cmp(&self.bone_shares[b]))
                .map_or(glam::DQuat::IDENTITY, turn);
            let mut sum = glam::DVec4::ZERO;
            for (b, &share) in self.bone_shares.iter().enumerate() {
                if share > 0.0 {
                    let q = glam::DVec4::from(turn(b));
                    let q = if q.dot(glam::DVec4::from(lead)) < 0.0 {
                        -q
                    } else {
                        q
                    };
                    sum += share * q;
                }
            }
            let rotation = glam::DQuat::from_vec4(sum).normalize();
            let centroid = self.targets.iter().sum::<DVec3>() / self.targets.len() as f64;
            for (t, b) in self.targets.iter_mut().zip(&self.bind_positions) {
                *t = centroid + rotation * (*b - self.bind_centroid);
            }
        }
        Ok(&self.targets)
    }

    /// Drives `cloth` for the coming frame from the bones' `poses`: teleports it with the anchor
    /// if the anchor jumped, carries it by the part of the anchor's motion the inertia scales
    /// remove, and sets the pin targets. The cloth's pins must be [`Attachments::nodes`]. Bad
    /// poses are refused before anything changes. Returns whether the cloth was teleported.
    pub fn apply(&mut self, cloth: &mut Cloth, poses: &[Pose]) -> Result<bool, AttachError> {
        self.apply_carrying(cloth, poses, true)
    }

    /// [`Attachments::apply`], with the inertia carry (the anchor's motion the inertia scales
    /// remove) done only where `carry` is set. A cloth that only follows its skin this tick
    /// ([`Cloth::follow_skin`], a crowd's far cloths) is moved with its skin by that, carry or
    /// not: carrying it first moves every node, velocity and skin target for nothing. (On
    /// `crowd`, 64 capes most of them following their skin, the carry was a fifth of the
    /// tick's work.) Teleports, pin targets and skin targets are as in `apply`.
    pub fn apply_carrying(
        &mut self,
        cloth: &mut Cloth,
        poses: &[Pose],
        carry: bool,
    ) -> Result<bool, AttachError> {
        self.apply_using(cloth, poses, carry, SkinUse::Every)
    }

    /// [`Attachments::apply_carrying`], skinning only what the cloth needs this frame
    /// (`skin`, [`SkinUse`]; without [`Attachments::with_skin`] there is nothing to skin). A
    /// cloth given every node's targets again after frames without them starts the frame on
    /// them ([`Cloth::set_skin_pose`]), so that its limits do not sweep from a stale pose.
    pub fn apply_using(
        &mut self,
        cloth: &mut Cloth,
        poses: &[Pose],
        carry: bool,
        skin: SkinUse,
    ) -> Result<bool, AttachError> {
        check_poses(poses, self.bone_count)?;
        if cloth.pins() != self.pins.nodes.as_slice() {
            return Err(AttachError::Cloth(ClothError::InvalidSetting {
                name: "pins",
                reason: "the cloth's pins are not the attached nodes (call Cloth::set_pins)".into(),
            }));
        }
        let anchor = poses[self.anchor as usize];
        let mut teleported = false;
        // A still anchor carries nothing (and leaves a sleeping cloth asleep).
        if let Some(last) = self.last_anchor.filter(|last| *last != anchor) {
            // delta maps the anchor's last pose onto its new one.
            let delta = anchor.mul(&last.inverse());
            let jump = anchor.translation.distance(last.translation);
            let s = &self.settings;
            if jump > s.teleport_distance {
                cloth.teleport(&delta)?;
                carry_frames(&mut self.last_frames, &delta);
                teleported = true;
            } else if carry && (s.linear_inertia < 1.0 || s.angular_inertia < 1.0) {
                // Carry the cloth by the motion it should not feel, about the anchor.
                let rotation = glam::DQuat::IDENTITY.slerp(delta.rotation, 1.0 - s.angular_inertia);
                let shift = (1.0 - s.linear_inertia) * (anchor.translation - last.translation);
                let carry = Pose::new(
                    last.translation + shift - rotation * last.translation,
                    rotation,
                );
                cloth.teleport(&carry)?;
                carry_frames(&mut self.last_frames, &carry);
            }
        }
        self.last_anchor = Some(anchor);
        self.targets(poses)?;
        cloth.set_pin_targets(&self.targets)?;
        let every = match skin {
            SkinUse::Every => true,
            SkinUse::Limits => cloth.limit_settings().uses_skin(),
            SkinUse::Motion | SkinUse::Nothing => false,
        };
        if let Some(s) = &self.skin {
            if every {
                s.evaluate(&self.frames, &mut self.skin_targets);
                if self.targets_given {
                    cloth.set_skin_targets(&self.skin_targets)?;
                } else {
                    cloth.set_skin_pose(&self.skin_targets)?;
                }
            } else if skin == SkinUse::Motion && self.last_frames.len() == self.frames.len() {
                let (rotation, from, to) =
                    self.moments
                        .motion(&self.last_frames, &self.frames, self.anchor as usize);
                cloth.set_skin_motion(crate::cloth::SkinMotion {
                    rotation,
                    from,
                    to,
                    moving: self.last_frames != self.frames,
                })?;
            }
        }
        self.targets_given = every && self.skin.is_some();
        self.last_frames.clone_from(&self.frames);
        Ok(teleported)
    }
}

/// Carries bone frames by a rigid `pose` (the cloth was teleported or carried with them).
fn carry_frames(frames: &mut [DAffine3], pose: &Pose) {
    let m = DAffine3::from_rotation_translation(pose.rotation, pose.translation);
    for f in frames {
        *f = m * *f;
    }
}
