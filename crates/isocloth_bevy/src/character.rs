//! A skinned, animated character from a glTF file (`.glb`, or `.gltf` with its buffers beside it
//! or embedded; read with the `gltf` crate): its joints' world transforms at any time of a clip,
//! linear blend skinning of every skinned mesh in the file, collision
//! capsules fitted to its joints from the skin weights, and the joints a cape hangs from.
//!
//! Engine-free: plain `glam` data in, plain data out. The `gltf_cape` example drives bone
//! entities of the Bevy plugin with it.

use std::collections::HashMap;

use glam::{Mat3, Mat4, Quat, Vec3, Vec4};
use gltf::animation::Interpolation;
use gltf::animation::util::ReadOutputs;
use isocloth::{ColliderShape, Pose};
use thiserror::Error;

/// A glTF character that cannot drive a cape.
#[derive(Debug, Error)]
pub enum CharacterError {
    /// Not a readable glTF file.
    #[error("not a readable glTF file: {0}")]
    Gltf(#[from] gltf::Error),
    /// A buffer refers to a `.glb`'s binary chunk, and the file has none.
    #[error("buffer {buffer} refers to the binary chunk, and the file has none")]
    NoBinary {
        /// The buffer's index in the file.
        buffer: usize,
    },
    /// A buffer lives in a file beside the `.gltf`, and the bytes were given without their
    /// folder ([`Character::from_glb`]); [`Character::from_file`] reads it.
    #[error(
        "buffer {buffer} is the outside file {uri:?}: read the character with Character::from_file"
    )]
    OutsideBuffer {
        /// The buffer's index in the file.
        buffer: usize,
        /// Its URI as written.
        uri: String,
    },
    /// A buffer's file beside the `.gltf` cannot be read.
    #[error("buffer {buffer}: cannot read {path}: {source}")]
    MissingBuffer {
        /// The buffer's index in the file.
        buffer: usize,
        /// Where it was looked for.
        path: std::path::PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// A buffer's `data:` URI is not base64 data.
    #[error("buffer {buffer}: its data URI is not base64 data ({reason})")]
    BadDataUri {
        /// The buffer's index in the file.
        buffer: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A buffer holds fewer bytes than the file declares.
    #[error("buffer {buffer} holds {actual} bytes, the file declares {declared}")]
    ShortBuffer {
        /// The buffer's index in the file.
        buffer: usize,
        /// Its declared `byteLength`.
        declared: usize,
        /// The bytes found.
        actual: usize,
    },
    /// The character file itself cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No mesh node with a skin.
    #[error("the file has no skinned mesh (a node with both a mesh and a skin)")]
    NoSkin,
    /// The skinned mesh lacks an attribute the skinning needs.
    #[error("the skinned mesh has no {0}")]
    MissingAttribute(&'static str),
    /// A clip asked for by name does not exist.
    #[error("no animation clip named {name:?} (the file has {available:?})")]
    NoSuchClip {
        /// The name asked for.
        name: String,
        /// The clips' names (`#k` for unnamed ones).
        available: Vec<String>,
    },
    /// The file has no animation at all.
    #[error("the file has no animation clip")]
    NoClips,
    /// A node's rest transform, an inverse bind matrix, a vertex or a keyframe is NaN or
    /// infinite.
    #[error("non-finite data in {0}")]
    NonFinite(String),
    /// The skeleton has no joint with three children (the chest: neck and two arms) above
    /// its hips, so the cape's joints cannot be found from its shape: name the joint to hang
    /// the cape from ([`Character::cape_joints_from`], `gltf_cape --spine JOINT`).
    #[error(
        "no joint with three or more children (the upper spine) above the hips: name the joint to hang the cape from (joints: {joints:?})"
    )]
    NoUpperSpine {
        /// The skeleton's joint names.
        joints: Vec<String>,
    },
    /// No joint has the name asked for.
    #[error("no joint named {name:?} (joints: {available:?})")]
    NoSuchJoint {
        /// The name asked for.
        name: String,
        /// The skeleton's joint names.
        available: Vec<String>,
    },
    /// No node or mesh of the file has the cloth's name.
    #[error("no mesh named {name:?} in the file (meshes: {available:?})")]
    NoSuchMesh {
        /// The name asked for.
        name: String,
        /// The names of the file's mesh nodes.
        available: Vec<String>,
    },
    /// The cloth's mesh has no skin, and its pins were to come from it.
    #[error("the mesh {mesh:?} has no skin: its pins cannot come from skin weights")]
    ClothNotSkinned {
        /// The mesh's name.
        mesh: String,
    },
    /// A cloth mesh's attribute is missing, of the wrong type, or out of range.
    #[error("the mesh {mesh:?}: attribute {attribute}: {reason}")]
    BadAttribute {
        /// The mesh's name.
        mesh: String,
        /// The attribute (`COLOR_0`, `JOINTS_0`, ...).
        attribute: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// A skinned mesh in the form Bevy's glTF loader gives it (a `SkinnedMesh`'s joints and
/// inverse bind poses, the mesh's `JOINT_INDEX`, `JOINT_WEIGHT` and `COLOR`): a mesh of the
/// file read as cloth ([`Character::from_file_with_cloth`]), or the whole body
/// ([`Character::body_part`]). Vertices in bind space.
#[derive(Debug, Clone, PartialEq)]
pub struct SkinnedPart {
    /// The node's name (or the mesh's).
    pub name: String,
    /// Vertex positions in bind space.
    pub positions: Vec<Vec3>,
    /// Triangles, three indices each.
    pub indices: Vec<u32>,
    /// Per skin slot, the character's joint ([`Character::joint_names`] order).
    pub joints: Vec<usize>,
    /// Per skin slot, its inverse bind matrix.
    pub inverse_bindposes: Vec<Mat4>,
    /// Per vertex, four skin slots.
    pub joint_indices: Vec<[u16; 4]>,
    /// Per vertex, their weights (as stored: not normalised, so that a vertex left unweighted
    /// reads as free).
    pub joint_weights: Vec<[f32; 4]>,
    /// Per vertex, `COLOR_0` as RGBA in 0..=1, if the mesh has it.
    pub colors: Option<Vec<[f32; 4]>>,
    /// Per vertex, the painted max distance in metres (the custom attribute `_MAX_DISTANCE`, a
    /// float scalar, finite and >= 0), if the mesh has it.
    pub max_distance: Option<Vec<f32>>,
}

/// Which transform part a channel animates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    Translation,
    Rotation,
    Scale,
}

/// One animated node part: keyframe times and values (`xyz` or a quaternion's `xyzw`).
#[derive(Debug, Clone)]
struct Channel {
    node: usize,
    part: Part,
    step: bool,
    times: Vec<f32>,
    values: Vec<Vec4>,
}

/// An animation clip.
#[derive(Debug, Clone)]
pub struct Clip {
    /// Its name in the file (`#k` if it has none).
    pub name: String,
    /// Its length in seconds (the last keyframe).
    pub duration: f32,
    /// Sorted by node; node `i`'s channels are `channels[starts[i]..starts[i + 1]]`.
    channels: Vec<Channel>,
    starts: Vec<u32>,
}

/// A node's rest transform and parent.
#[derive(Debug, Clone)]
struct Node {
    parent: Option<usize>,
    translation: Vec3,
    rotation: Quat,
    scale: Vec3,
}

/// A collision capsule fitted to a joint (see [`Character::fit_capsules`]).
#[derive(Debug, Clone, PartialEq)]
pub struct JointCapsule {
    /// The joint (index into [`Character::joint_names`]).
    pub joint: usize,
    /// The capsule.
    pub shape: ColliderShape,
    /// Its pose in the joint's frame (the joint's world transform without scale).
    pub offset: Pose,
}

/// The joints a cape hangs from (see [`Character::cape_joints`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapeJoints {
    /// The upper spine (chest).
    pub spine: usize,
    /// The two shoulders (the upper-arm joints); both `spine` where it has none.
    pub shoulders: [usize; 2],
    /// The character's facing direction in the rest pose (horizontal, unit); a cape laid out
    /// at another pose turns it with the upper spine ([`CapeLayout::forward`]).
    pub forward: Vec3,
}

/// A skinned, animated character (see the module docs).
#[derive(Debug, Clone)]
pub struct Character {
    nodes: Vec<Node>,
    /// Nodes with parents before children.
    order: Vec<usize>,
    /// Skin joint -> node: the joints of every skin in the file's skinned meshes, each node
    /// once (the first skin's joints first, in its order).
    joints: Vec<usize>,
    joint_names: Vec<String>,
    /// Per binding (a joint as one skin binds it): its joint and inverse bind matrix. Skins that
    /// bind a node alike share one binding; the vertices' joint indices are bindings.
    binding_joint: Vec<u16>,
    inverse_bind: Vec<Mat4>,
    positions: Vec<Vec3>,
    indices: Vec<u32>,
    skin_joints: Vec<[u16; 4]>,
    skin_weights: Vec<[f32; 4]>,
    clips: Vec<Clip>,
    cloths: Vec<SkinnedPart>,
}

/// Every buffer's bytes: the binary chunk, a base64 `data:` URI, or a file in `folder` (none:
/// refused as [`CharacterError::OutsideBuffer`]), each checked against its declared length.
fn buffers(
    doc: &gltf::Document,
    blob: Option<&[u8]>,
    folder: Option<&std::path::Path>,
) -> Result<Vec<Vec<u8>>, CharacterError> {
    let mut out = Vec::with_capacity(doc.buffers().len());
    for b in doc.buffers() {
        let buffer = b.index();
        let bytes = match b.source() {
            gltf::buffer::Source::Bin => blob.ok_or(CharacterError::NoBinary { buffer })?.to_vec(),
            gltf::buffer::Source::Uri(uri) if uri.starts_with("data:") => {
                let (head, data) = uri.split_once(',').ok_or(CharacterError::BadDataUri {
                    buffer,
                    reason: "no comma before the data",
                })?;
                if !head.ends_with(";base64") {
                    return Err(CharacterError::BadDataUri {
                        buffer,
                        reason: "not marked ;base64",
                    });
                }
                base64(data).ok_or(CharacterError::BadDataUri {
                    buffer,
                    reason: "a character outside the base64 alphabet",
                })?
            }
            gltf::buffer::Source::Uri(uri) => {
                let Some(folder) = folder else {
                    return Err(CharacterError::OutsideBuffer {
                        buffer,
                        uri: uri.to_string(),
                    });
                };
                let path = folder.join(percent_decoded(uri));
                std::fs::read(&path).map_err(|source| CharacterError::MissingBuffer {
                    buffer,
                    path,
                    source,
                })?
            }
        };
        if bytes.len() < b.length() {
            return Err(CharacterError::ShortBuffer {
                buffer,
                declared: b.length(),
                actual: bytes.len(),
            });
        }
        out.push(bytes);
    }
    Ok(out)
}

/// Standard base64 (padding optional, whitespace skipped); `None` at any other character.
fn base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// A relative URI as a path: `%XX` escapes decoded (a malformed one is kept as written).
fn percent_decoded(uri: &str) -> String {
    let b = uri.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |k: usize| b.get(k).and_then(|&c| (c as char).to_digit(16));
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn finite(m: &[f32], what: impl FnOnce() -> String) -> Result<(), CharacterError> {
    if m.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(CharacterError::NonFinite(what()))
    }
}

impl Character {
    /// Reads a character from glTF bytes: a `.glb`, or a `.gltf` whose buffers are embedded as
    /// base64 `data:` URIs. A `.gltf` with buffers in files beside it needs their folder: use
    /// [`Character::from_file`] (here such a buffer is [`CharacterError::OutsideBuffer`]).
    ///
    /// What is read: every node with both a mesh and a skin (all their triangle primitives;
    /// converters often split a character's body into several skinned meshes sharing one
    /// skeleton, and each part is skinned, drawn and fitted with capsules), the joints of their
    /// skins with the inverse bind matrices, and every clip's translation, rotation and scale
    /// channels (morph weights are ignored). Refuses files without a skinned mesh or with
    /// non-finite data.
    pub fn from_glb(bytes: &[u8]) -> Result<Self, CharacterError> {
        Self::from_gltf_bytes(bytes, None, None)
    }

    /// Reads a `.glb` or `.gltf` file as [`Character::from_glb`] does; a `.gltf`'s buffer files
    /// are looked for relative to the file's folder (percent-escapes in their URIs decoded). A
    /// missing buffer file is [`CharacterError::MissingBuffer`], naming the path.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Self, CharacterError> {
        Self::from_file_with_cloth(path, None)
    }

    /// [`Character::from_file`], with the mesh node named `cloth` (case-insensitive, the
    /// node's name or its mesh's) read as cloth, not as body: it gets no capsules and is not
    /// drawn as skin; [`Character::cloths`] holds it with its own skin. A name no node has is
    /// [`CharacterError::NoSuchMesh`]; a mesh of that name without a skin is
    /// [`CharacterError::ClothNotSkinned`].
    pub fn from_file_with_cloth(
        path: impl AsRef<std::path::Path>,
        cloth: Option<&str>,
    ) -> Result<Self, CharacterError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| CharacterError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let dir = path.parent().unwrap_or_else(|| std::path::Path::new(""));
        Self::from_gltf_bytes(&bytes, Some(dir), cloth)
    }

    /// [`Character::from_glb`] with the mesh named `cloth` read as cloth
    /// ([`Character::from_file_with_cloth`]).
    pub fn from_glb_with_cloth(bytes: &[u8], cloth: Option<&str>) -> Result<Self, CharacterError> {
        Self::from_gltf_bytes(bytes, None, cloth)
    }

    /// The body (every skinned mesh not read as cloth, joined) as one skinned part: its skin
    /// slots are the character's joint bindings, its name `"body"`.
    pub fn body_part(&self) -> SkinnedPart {
        SkinnedPart {
            name: "body".into(),
            positions: self.positions.clone(),
            indices: self.indices.clone(),
            joints: self.binding_joint.iter().map(|&j| j as usize).collect(),
            inverse_bindposes: self.inverse_bind.clone(),
            joint_indices: self.skin_joints.clone(),
            joint_weights: self.skin_weights.clone(),
            colors: None,
            max_distance: None,
        }
    }

    /// The skinned meshes read as cloth ([`Character::from_file_with_cloth`]).
    pub fn cloths(&self) -> &[SkinnedPart] {
        &self.cloths
    }

    fn from_gltf_bytes(
        bytes: &[u8],
        folder: Option<&std::path::Path>,
        cloth: Option<&str>,
    ) -> Result<Self, CharacterError> {
        let gltf = gltf::Gltf::from_slice(bytes)?;
        let doc = &gltf.document;
        let buffers = buffers(doc, gltf.blob.as_deref(), folder)?;
        let data = |b: gltf::Buffer| buffers.get(b.index()).map(Vec::as_slice);

        let count = doc.nodes().len();
        let mut nodes: Vec<Node> = Vec::with_capacity(count);
        for n in doc.nodes() {
            let (t, r, s) = n.transform().decomposed();
            finite(&[t, s].concat(), || {
                format!("the rest transform of node {}", n.index())
            })?;
            finite(&r, || format!("the rest rotation of node {}", n.index()))?;
            nodes.push(Node {
                parent: None,
                translation: Vec3::from(t),
                rotation: Quat::from_array(r).normalize(),
                scale: Vec3::from(s),
            });
        }
        for n in doc.nodes() {
            for c in n.children() {
                nodes[c.index()].parent = Some(n.index());
            }
        }
        let mut order = Vec::with_capacity(count);
        let mut placed = vec![false; count];
        while order.len() < count {
            let before = order.len();
            for i in 0..count {
                if !placed[i] && nodes[i].parent.is_none_or(|p| placed[p]) {
                    placed[i] = true;
                    order.push(i);
                }
            }
            if order.len() == before {
                break; // a cycle (refused by validation already)
            }
        }

        let named = |n: &gltf::Node, name: &str| {
            n.name().is_some_and(|s| s.eq_ignore_ascii_case(name))
                || n.mesh()
                    .and_then(|m| m.name().map(|s| s.eq_ignore_ascii_case(name)))
                    .unwrap_or(false)
        };
        let mut cloth_nodes: Vec<gltf::Node> = Vec::new();
        if let Some(name) = cloth {
            cloth_nodes = doc
                .nodes()
                .filter(|n| n.mesh().is_some() && named(n, name))
                .collect();
            if cloth_nodes.is_empty() {
                return Err(CharacterError::NoSuchMesh {
                    name: name.to_string(),
                    available: doc
                        .nodes()
                        .filter(|n| n.mesh().is_some())
                        .map(|n| {
                            n.name()
                                .or_else(|| n.mesh().and_then(|m| m.name()))
                                .map_or_else(|| format!("#{}", n.index()), str::to_string)
                        })
                        .collect(),
                });
            }
            if let Some(n) = cloth_nodes.iter().find(|n| n.skin().is_none()) {
                return Err(CharacterError::ClothNotSkinned { mesh: name_of(n) });
            }
        }
        let is_cloth = |n: &gltf::Node| cloth_nodes.iter().any(|c| c.index() == n.index());
        let parts: Vec<gltf::Node> = doc
            .nodes()
            .filter(|n| n.mesh().is_some() && n.skin().is_some())
            .collect();
        if !parts.iter().any(|n| !is_cloth(n)) {
            return Err(CharacterError::NoSkin);
        }
        // Joints: every skin's, each node once; bindings: (joint, inverse bind) pairs, shared
        // where two skins bind a node alike.
        let mut joints: Vec<usize> = Vec::new();
        let mut joint_names: Vec<String> = Vec::new();
        let mut binding_joint: Vec<u16> = Vec::new();
        let mut inverse_bind: Vec<Mat4> = Vec::new();
        let mut skin_bindings: Vec<(usize, Vec<u16>)> = Vec::new();
        for part in &parts {
            let Some(skin) = part.skin() else { continue };
            if skin_bindings.iter().any(|(k, _)| *k == skin.index()) {
                continue;
            }
            let count = skin.joints().len();
            let ibm: Vec<Mat4> = match skin.reader(data).read_inverse_bind_matrices() {
                Some(m) => m.map(|m| Mat4::from_cols_array_2d(&m)).collect(),
                None => vec![Mat4::IDENTITY; count],
            };
            if ibm.len() != count {
                return Err(CharacterError::MissingAttribute(
                    "inverse bind matrix per joint",
                ));
            }
            let mut map = Vec::with_capacity(count);
            for (j, (node, m)) in skin.joints().zip(ibm).enumerate() {
                finite(&m.to_cols_array(), || {
                    format!(
                        "the inverse bind matrix of joint {j} of skin {}",
                        skin.index()
                    )
                })?;
                let joint = match joints.iter().position(|&n| n == node.index()) {
                    Some(k) => k,
                    None => {
                        joints.push(node.index());
                        joint_names.push(
                            node.name()
                                .map_or_else(|| format!("#{}", node.index()), str::to_string),
                        );
                        joints.len() - 1
                    }
                };
                let binding = (0..binding_joint.len())
                    .find(|&b| {
                        binding_joint[b] as usize == joint && inverse_bind[b].abs_diff_eq(m, 1e-6)
                    })
                    .unwrap_or_else(|| {
                        binding_joint.push(joint as u16);
                        inverse_bind.push(m);
                        binding_joint.len() - 1
                    });
                if binding > u16::MAX as usize {
                    return Err(CharacterError::MissingAttribute(
                        "at most 65,536 joint bindings",
                    ));
                }
                map.push(binding as u16);
            }
            skin_bindings.push((skin.index(), map));
        }

        let (mut positions, mut indices, mut skin_joints, mut skin_weights) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut cloths = Vec::new();
        for part in parts.iter().filter(|n| is_cloth(n)) {
            cloths.push(read_cloth(part, data, &joints)?);
        }
        for part in parts.iter().filter(|n| !is_cloth(n)) {
            let (Some(mesh), Some(skin)) = (part.mesh(), part.skin()) else {
                continue;
            };
            let map = &skin_bindings
                .iter()
                .find(|(k, _)| *k == skin.index())
                .ok_or(CharacterError::NoSkin)?
                .1;
            for prim in mesh.primitives() {
                if prim.mode() != gltf::mesh::Mode::Triangles {
                    continue;
                }
                let r = prim.reader(data);
                let base = positions.len() as u32;
                let p: Vec<Vec3> = r
                    .read_positions()
                    .ok_or(CharacterError::MissingAttribute("POSITION"))?
                    .map(Vec3::from)
                    .collect();
                let n = p.len();
                let j: Vec<[u16; 4]> = r
                    .read_joints(0)
                    .ok_or(CharacterError::MissingAttribute("JOINTS_0"))?
                    .into_u16()
                    .collect();
                let w: Vec<[f32; 4]> = r
                    .read_weights(0)
                    .ok_or(CharacterError::MissingAttribute("WEIGHTS_0"))?
                    .into_f32()
                    .collect();
                if j.len() != n || w.len() != n {
                    return Err(CharacterError::MissingAttribute(
                        "a joint and weight per vertex",
                    ));
                }
                if j.iter().flatten().any(|&k| k as usize >= map.len()) {
                    return Err(CharacterError::MissingAttribute(
                        "joint indices within the skin",
                    ));
                }
                match r.read_indices() {
                    Some(i) => {
                        let start = indices.len();
                        indices.extend(i.into_u32());
                        if indices[start..].iter().any(|&k| k as usize >= n) {
                            return Err(CharacterError::MissingAttribute(
                                "indices within the vertices",
                            ));
                        }
                        for k in &mut indices[start..] {
                            *k += base;
                        }
                    }
                    None => indices.extend(base..base + n as u32),
                }
                positions.extend(p);
                skin_joints.extend(j.iter().map(|j| j.map(|k| map[k as usize])));
                skin_weights.extend(w);
            }
        }
        if positions.is_empty() {
            return Err(CharacterError::MissingAttribute("triangles"));
        }
        if indices.iter().any(|&k| k as usize >= positions.len()) {
            return Err(CharacterError::MissingAttribute(
                "indices within the vertices",
            ));
        }
        finite(
            &positions
                .iter()
                .flat_map(|p| p.to_array())
                .collect::<Vec<_>>(),
            || "the skinned mesh's positions".into(),
        )?;

        let mut clips = Vec::new();
        for (k, a) in doc.animations().enumerate() {
            let mut channels = Vec::new();
            for c in a.channels() {
                let r = c.reader(data);
                let (Some(times), Some(outputs)) = (r.read_inputs(), r.read_outputs()) else {
                    continue;
                };
                let times: Vec<f32> = times.collect();
                let (part, mut values): (Part, Vec<Vec4>) = match outputs {
                    ReadOutputs::Translations(t) => (
                        Part::Translation,
                        t.map(|v| Vec3::from(v).extend(0.0)).collect(),
                    ),
                    ReadOutputs::Rotations(q) => {
                        (Part::Rotation, q.into_f32().map(Vec4::from).collect())
                    }
                    ReadOutputs::Scales(s) => {
                        (Part::Scale, s.map(|v| Vec3::from(v).extend(0.0)).collect())
                    }
                    ReadOutputs::MorphTargetWeights(_) => continue,
                };
                let interpolation = c.sampler().interpolation();
                if interpolation == Interpolation::CubicSpline {
                    // In-tangent, value, out-tangent per key: the values, linearly.
                    values = values.chunks_exact(3).map(|v| v[1]).collect();
                }
                if times.is_empty() || values.len() != times.len() {
                    continue;
                }
                finite(&times, || format!("the keyframe times of clip {k}"))?;
                finite(
                    &values.iter().flat_map(|v| v.to_array()).collect::<Vec<_>>(),
                    || format!("the keyframes of clip {k}"),
                )?;
                channels.push(Channel {
                    node: c.target().node().index(),
                    part,
                    step: interpolation == Interpolation::Step,
                    times,
                    values,
                });
            }
            let duration = channels
                .iter()
                .filter_map(|c| c.times.last().copied())
                .fold(0.0f32, f32::max);
            channels.sort_by_key(|c| c.node);
            let starts = (0..=count)
                .map(|i| channels.partition_point(|c| c.node < i) as u32)
                .collect();
            clips.push(Clip {
                name: a.name().map_or_else(|| format!("#{k}"), str::to_string),
                duration,
                channels,
                starts,
            });
        }
        Ok(Self {
            nodes,
            order,
            joints,
            joint_names,
            binding_joint,
            inverse_bind,
            positions,
            indices,
            skin_joints,
            skin_weights,
            clips,
            cloths,
        })
    }

    /// The skin's joints' names (`#node` for unnamed ones), in joint order.
    pub fn joint_names(&self) -> &[String] {
        &self.joint_names
    }

    /// The clips.
    pub fn clips(&self) -> &[Clip] {
        &self.clips
    }

    /// The lowest height the skin reaches over `clip` (sampled at 60 Hz; `None`: the rest
    /// pose), where a ground under the character goes: a rig whose origin is at its hips, not
    /// its feet, would otherwise start with its cloth under a ground at height 0.
    pub fn lowest_point(&self, clip: Option<usize>) -> f32 {
        let duration = clip
            .and_then(|c| self.clips.get(c))
            .map_or(0.0, |c| c.duration.max(0.0));
        let samples = (duration * 60.0).ceil() as usize;
        let (mut pose, mut skinned) = (Vec::new(), Vec::new());
        let mut lowest = f32::MAX;
        for k in 0..=samples {
            self.joint_transforms(clip, k as f32 / 60.0, &mut pose);
            self.skin(&pose, &mut skinned);
            lowest = skinned.iter().fold(lowest, |a, p| a.min(p.y));
        }
        if lowest == f32::MAX { 0.0 } else { lowest }
    }

    /// The clip named `name`, or the first clip with `None`.
    pub fn clip(&self, name: Option<&str>) -> Result<usize, CharacterError> {
        match name {
            None if self.clips.is_empty() => Err(CharacterError::NoClips),
            None => Ok(0),
            Some(n) => self.clips.iter().position(|c| c.name == n).ok_or_else(|| {
                CharacterError::NoSuchClip {
                    name: n.to_string(),
                    available: self.clips.iter().map(|c| c.name.clone()).collect(),
                }
            }),
        }
    }

    /// The skinned meshes' triangles (three indices each; every part's, one after another).
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Vertex count of the skinned meshes (every part's).
    pub fn vertex_count(&self) -> usize {
        self.positions.len()
    }

    /// World transforms of the skin's joints (joint order) at time `t` of `clip` (looped;
    /// `None`: the rest pose). Keys interpolate linearly (rotations by normalised lerp along
    /// the shorter arc), step keys hold, cubic-spline keys are taken linearly through their
    /// values.
    pub fn joint_transforms(&self, clip: Option<usize>, t: f32, out: &mut Vec<Mat4>) {
        let clip = clip.and_then(|c| self.clips.get(c));
        let t = match clip {
            Some(c) if c.duration > 0.0 => t.rem_euclid(c.duration),
            _ => 0.0,
        };
        // Every node's world transform in `out[..n]` (parents first), then the joints' appended
        // and the nodes' drained: no allocation once `out` has grown.
        let n = self.nodes.len();
        out.clear();
        out.resize(n, Mat4::IDENTITY);
        for &i in &self.order {
            let node = &self.nodes[i];
            let (mut tr, mut rot, mut scale) = (node.translation, node.rotation, node.scale);
            if let Some(c) = clip {
                let range = c.starts[i] as usize..c.starts[i + 1] as usize;
                for ch in &c.channels[range] {
                    let v = sample(ch, t);
                    match ch.part {
                        Part::Translation => tr = v.truncate(),
                        Part::Rotation => rot = Quat::from_vec4(v).normalize(),
                        Part::Scale => scale = v.truncate(),
                    }
                }
            }
            let m = Mat4::from_scale_rotation_translation(scale, rot, tr);
            out[i] = match node.parent {
                Some(p) => out[p] * m,
                None => m,
            };
        }
        for &j in &self.joints {
            out.push(out[j]);
        }
        out.drain(..n);
    }

    /// Linear blend skinning: each vertex of the meshes at the joints' world transforms `joints`
    /// (from [`Character::joint_transforms`]).
    pub fn skin(&self, joints: &[Mat4], out: &mut Vec<Vec3>) {
        let skinning: Vec<Mat4> = self
            .binding_joint
            .iter()
            .zip(&self.inverse_bind)
            .map(|(&j, ib)| joints[j as usize] * *ib)
            .collect();
        out.clear();
        out.extend(
            self.positions
                .iter()
                .zip(self.skin_joints.iter().zip(&self.skin_weights))
                .map(|(&p, (j, w))| {
                    let total: f32 = w.iter().sum();
                    let mut q = Vec3::ZERO;
                    for k in 0..4 {
                        if w[k] > 0.0 {
                            q += w[k] * skinning[j[k] as usize].transform_point3(p);
                        }
                    }
                    if total > 0.0 { q / total } else { p }
                }),
        );
    }

    /// One capsule per joint that dominates enough of the skin, in the joint's frame. The
    /// rule:
    ///
    /// 1. A vertex belongs to the joint with its largest weight; joints with fewer than
    ///    `min_vertices` vertices get no capsule.
    /// 2. In the rest pose, the joint's vertices' principal axis (largest eigenvector of their
    ///    covariance) is the capsule's axis, through their centroid.
    /// 3. Its radius is the median distance of the vertices from that axis, times `inset` (below
    ///    1 keeps the capsule inside the skin, where cloth lying on the body should not float).
    /// 4. Its ends are the 10th and 90th percentiles of the vertices along the axis, pulled in by
    ///    the radius (the round caps reach those percentiles).
    pub fn fit_capsules(&self, min_vertices: usize, inset: f32) -> Vec<JointCapsule> {
        self.fit(min_vertices, inset, false)
    }

    /// One **tapered** capsule per joint (two end radii, [`ColliderShape::TaperedCapsule`]),
    /// which follows a limb that narrows (thigh to knee, forearm to wrist) where one radius
    /// must take the thick end's and float over the thin end or the thin end's and sink into
    /// the thick end. The rule is [`Character::fit_capsules`]'s with step 3 and 4 per end:
    ///
    /// 3. The vertices' distance from the axis is fitted by a straight line along it (least
    ///    squares over the vertices between the 10th and 90th percentiles), times `inset`.
    /// 4. Each ball's centre is pulled in from its percentile by its own radius (the caps reach
    ///    the 10th and 90th percentiles), and its radius is the line's value at its centre.
    ///    The radii are brought together (about their mean) until they differ by at most 90 %
    ///    of the distance between the centres, so the shape stays a capsule; a span too short
    ///    for two balls, or a fit that is not a positive radius, gives the plain capsule.
    pub fn fit_tapered_capsules(&self, min_vertices: usize, inset: f32) -> Vec<JointCapsule> {
        self.fit(min_vertices, inset, true)
    }

    /// [`Character::fit_capsules`] and [`Character::fit_tapered_capsules`].
    fn fit(&self, min_vertices: usize, inset: f32, tapered: bool) -> Vec<JointCapsule> {
        let mut rest = Vec::new();
        self.joint_transforms(None, 0.0, &mut rest);
        let mut skinned = Vec::new();
        self.skin(&rest, &mut skinned);
        let mut owned: Vec<Vec<Vec3>> = vec![Vec::new(); self.joints.len()];
        for (p, (j, w)) in skinned
            .iter()
            .zip(self.skin_joints.iter().zip(&self.skin_weights))
        {
            let k = (0..4).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap_or(0);
            if w[k] > 0.0 {
                owned[self.binding_joint[j[k] as usize] as usize].push(*p);
            }
        }
        fit_capsules_to_points(&owned, &rest, min_vertices, inset, tapered)
    }
}

/// The capsule rule of [`Character::fit_capsules`] (and, with `tapered`,
/// [`Character::fit_tapered_capsules`]) on skinned vertices already grouped by the joint that
/// dominates them: `owned[j]` the world positions of joint `j`'s vertices, `rest[j]` its world
/// transform at the same pose. One capsule per joint with at least `min_vertices` vertices, in
/// the joint's frame.
pub fn fit_capsules_to_points(
    owned: &[Vec<Vec3>],
    rest: &[Mat4],
    min_vertices: usize,
    inset: f32,
    tapered: bool,
) -> Vec<JointCapsule> {
    let mut out = Vec::new();
    for (joint, points) in owned.iter().enumerate() {
        if points.len() < min_vertices.max(4) || joint >= rest.len() {
            continue;
        }
        let frame = rigid(&rest[joint]);
        let inv = frame.inverse();
        let local: Vec<Vec3> = points.iter().map(|&p| inv.transform_point3(p)).collect();
        let centroid = local.iter().sum::<Vec3>() / local.len() as f32;
        let mut cov = Mat3::ZERO;
        for p in &local {
            let d = *p - centroid;
            cov += Mat3::from_cols(d * d.x, d * d.y, d * d.z);
        }
        let mut axis = Vec3::Y;
        for _ in 0..64 {
            axis = (cov * axis).normalize_or(Vec3::Y);
        }
        let mut along: Vec<f32> = local.iter().map(|p| (*p - centroid).dot(axis)).collect();
        let mut radial: Vec<f32> = local
            .iter()
            .map(|p| {
                let d = *p - centroid;
                (d - d.dot(axis) * axis).length()
            })
            .collect();
        along.sort_by(f32::total_cmp);
        radial.sort_by(f32::total_cmp);
        let pct = |v: &[f32], q: f32| v[((v.len() - 1) as f32 * q).round() as usize];
        let (lo, hi) = (pct(&along, 0.1), pct(&along, 0.9));
        let radius = (pct(&radial, 0.5) * inset).max(1e-3);
        let half_height = (0.5 * (hi - lo) - radius).max(0.0);
        let mut centre = centroid + 0.5 * (lo + hi) * axis;
        let mut shape = ColliderShape::Capsule {
            half_height: f64::from(half_height),
            radius: f64::from(radius),
        };
        if tapered && let Some((a, b, mid)) = end_radii(&local, centroid, axis, lo, hi, inset) {
            centre = centroid + mid * axis;
            shape = ColliderShape::TaperedCapsule {
                half_height: f64::from(0.5 * (hi - b - (lo + a))),
                bottom_radius: f64::from(a),
                top_radius: f64::from(b),
            };
        }
        out.push(JointCapsule {
            joint,
            shape,
            offset: Pose::new(
                centre.as_dvec3(),
                Quat::from_rotation_arc(Vec3::Y, axis)
                    .as_dquat()
                    .normalize(),
            ),
        });
    }
    out
}

impl Character {
    /// The joints a cape hangs from, found from the skeleton's shape, not its names: the upper
    /// spine is the highest joint (in the rest pose) with three or more child joints (the chest,
    /// parent of the neck and both arms) other than the hips (the top joint, whose children
    /// include two below it: the legs; a cape there would hang from the waist); the shoulders
    /// are its two children farthest apart. The character faces where its toes
    /// point: the mean horizontal direction from each leaf joint below the hips to its
    /// parent's position, reversed (leaf minus parent); `+Z` (the glTF convention) if that is
    /// undefined. A skeleton without such a joint is [`CharacterError::NoUpperSpine`]: name the
    /// joint with [`Character::cape_joints_from`].
    pub fn cape_joints(&self) -> Result<CapeJoints, CharacterError> {
        let tree = self.tree();
        let spine = (0..self.joints.len())
            .filter(|&j| tree.children(j).len() >= 3 && !tree.is_hips(j))
            .max_by(|&a, &b| tree.pos[a].y.total_cmp(&tree.pos[b].y))
            .ok_or_else(|| CharacterError::NoUpperSpine {
                joints: self.joint_names.clone(),
            })?;
        Ok(tree.cape_joints(spine))
    }

    /// [`Character::cape_joints`] with the upper spine named: the joint `spine` (by its name in
    /// the file). The shoulders are its two children farthest apart horizontally (in the rest
    /// pose), or its grandchildren where fewer than two children stand apart, or the joint
    /// itself where none do (the cape then takes its width from the skin alone).
    pub fn cape_joints_from(&self, spine: &str) -> Result<CapeJoints, CharacterError> {
        let j = self
            .joint_names
            .iter()
            .position(|n| n == spine)
            .ok_or_else(|| CharacterError::NoSuchJoint {
                name: spine.to_string(),
                available: self.joint_names.clone(),
            })?;
        Ok(self.tree().cape_joints(j))
    }

    /// The skeleton in the rest pose: each joint's position and parent joint.
    fn tree(&self) -> Tree {
        let mut rest = Vec::new();
        self.joint_transforms(None, 0.0, &mut rest);
        let pos: Vec<Vec3> = rest.iter().map(|m| m.w_axis.truncate()).collect();
        let joint_of: HashMap<usize, usize> = self
            .joints
            .iter()
            .enumerate()
            .map(|(j, &n)| (n, j))
            .collect();
        let parent = |j: usize| -> Option<usize> {
            let mut n = self.nodes[self.joints[j]].parent;
            while let Some(p) = n {
                if let Some(&pj) = joint_of.get(&p) {
                    return Some(pj);
                }
                n = self.nodes[p].parent;
            }
            None
        };
        Tree {
            parents: (0..self.joints.len()).map(parent).collect(),
            pos,
        }
    }
}

/// A skeleton's joints in the rest pose (see [`Character::cape_joints`]).
struct Tree {
    parents: Vec<Option<usize>>,
    pos: Vec<Vec3>,
}

impl Tree {
    fn children(&self, j: usize) -> Vec<usize> {
        (0..self.parents.len())
            .filter(|&c| self.parents[c] == Some(j))
            .collect()
    }

    /// Whether `j` is the hips: a joint with no joint above it whose children reach below it
    /// on at least two branches (the legs).
    fn is_hips(&self, j: usize) -> bool {
        self.parents[j].is_none()
            && self
                .children(j)
                .iter()
                .filter(|&&c| self.pos[c].y < self.pos[j].y)
                .count()
                >= 2
    }

    /// The cape's joints hanging from `spine` (see [`Character::cape_joints_from`]).
    fn cape_joints(&self, spine: usize) -> CapeJoints {
        let pos = &self.pos;
        let farthest = |candidates: &[usize]| {
            let mut best: Option<(usize, usize, f32)> = None;
            for (i, &a) in candidates.iter().enumerate() {
                for &b in &candidates[i + 1..] {
                    let d = (pos[a] - pos[b]).with_y(0.0).length();
                    if d > 1e-3 && best.is_none_or(|x| d > x.2) {
                        best = Some((a, b, d));
                    }
                }
            }
            best.map(|(a, b, _)| [a, b])
        };
        let kids = self.children(spine);
        let grandchildren: Vec<usize> = kids.iter().flat_map(|&k| self.children(k)).collect();
        let shoulders = farthest(&kids)
            .or_else(|| farthest(&grandchildren))
            .unwrap_or([spine, spine]);
        let low = pos[spine].y;
        let mut toes = Vec3::ZERO;
        for j in 0..self.parents.len() {
            if self.children(j).is_empty()
                && pos[j].y < 0.5 * low
                && let Some(p) = self.parents[j]
            {
                toes += (pos[j] - pos[p]).with_y(0.0);
            }
        }
        let forward = toes.try_normalize().unwrap_or(Vec3::Z);
        CapeJoints {
            spine,
            shoulders,
            forward,
        }
    }
}

/// A cape for a character (see [`Character::cape`]): a grid hanging from its top row.
#[derive(Debug, Clone, PartialEq)]
pub struct CapeLayout {
    /// Vertex positions in world space: row `r`, column `c` at `r * (cols + 1) + c`, row 0 on
    /// top.
    pub positions: Vec<Vec3>,
    /// Triangles, three indices each.
    pub indices: Vec<u32>,
    /// Pinned vertices with their joints and weights: every top-row vertex on the upper spine
    /// (`1 - 2 shoulder_weight`) and on each shoulder (`shoulder_weight`).
    pub pins: Vec<(u32, usize, f32)>,
    /// Width and length in metres.
    pub size: [f32; 2],
    /// The way the character's back faces at the pose the cape was laid out in (horizontal,
    /// unit): the cape hangs on the other side of it.
    pub forward: Vec3,
}

impl Character {
    /// A `cols` x `rows` cape hanging from the character's back at time `t` of `clip`. The
    /// rule: as wide as the shoulders plus two upper-arm capsule radii, 35 % of the
    /// character's height long (to about the hips, above the legs' swing), its top edge at
    /// shoulder height, in a vertical plane 2 cm behind the rearmost point of the skin it
    /// covers. Every top-row vertex hangs from the upper spine and both shoulders with the same
    /// weights (`shoulder_weight` each, 0.15 in the example): equal weights along the row move
    /// it as one blended frame, where weights that change along it stretch the pinned edge by
    /// the bones' relative motion (on a skeleton without collarbones the shoulders are the
    /// upper arms, which swing).
    pub fn cape(
        &self,
        clip: Option<usize>,
        t: f32,
        cols: u32,
        rows: u32,
        shoulder_weight: f32,
    ) -> Result<CapeLayout, CharacterError> {
        Ok(self.cape_on(&self.cape_joints()?, clip, t, cols, rows, shoulder_weight))
    }

    /// [`Character::cape`] hanging from `joints` (from [`Character::cape_joints`] or
    /// [`Character::cape_joints_from`]). Everything is measured at time `t` of `clip`, the
    /// pose the cloth first steps in: the back faces the rest pose's facing turned by the upper
    /// spine's rotation since the rest pose (made horizontal), and the cape is centred across
    /// the back on the skin of the torso (the vertices the upper spine and the joints above it
    /// dominate, between the cape's top and bottom edge), not on the spine joint, which rigs
    /// may place off the body's midline. It is at least as wide as that skin.
    pub fn cape_on(
        &self,
        joints: &CapeJoints,
        clip: Option<usize>,
        t: f32,
        cols: u32,
        rows: u32,
        shoulder_weight: f32,
    ) -> CapeLayout {
        let capsules = self.fit_capsules(30, 0.9);
        let radius = |j: usize| {
            capsules
                .iter()
                .find(|c| c.joint == j)
                .and_then(|c| match c.shape {
                    ColliderShape::Capsule { radius, .. } => Some(radius as f32),
                    _ => None,
                })
        };
        let (mut rest, mut pose) = (Vec::new(), Vec::new());
        self.joint_transforms(None, 0.0, &mut rest);
        self.joint_transforms(clip, t, &mut pose);
        let at = |j: usize| pose[j].w_axis.truncate();
        let rotation = |m: &Mat4| m.to_scale_rotation_translation().1.normalize();
        let turn = rotation(&pose[joints.spine]) * rotation(&rest[joints.spine]).inverse();
        let forward = (turn * joints.forward)
            .with_y(0.0)
            .try_normalize()
            .unwrap_or(joints.forward);
        let side = Vec3::Y.cross(forward).normalize();
        let [l, r] = joints.shoulders.map(at);
        let spine = at(joints.spine);
        let own_shoulders = joints.shoulders[0] != joints.shoulders[1];
        let arm = if own_shoulders {
            joints
                .shoulders
                .iter()
                .filter_map(|&s| radius(s))
                .fold(0.04f32, f32::max)
        } else {
            0.0
        };
        let mut skinned = Vec::new();
        self.skin(&pose, &mut skinned);
        let (lo, hi) = skinned
            .iter()
            .fold((f32::MAX, f32::MIN), |(a, b), p| (a.min(p.y), b.max(p.y)));
        let length = 0.35 * (hi - lo);
        let top_y = if own_shoulders {
            0.5 * (l.y + r.y)
        } else {
            spine.y
        };
        let band = |p: &Vec3| p.y <= top_y && p.y >= top_y - length;
        // The torso: the upper spine and the joints above it in the skeleton.
        let tree = self.tree();
        let mut torso = vec![false; self.joints.len()];
        let mut up = Some(joints.spine);
        while let Some(j) = up {
            torso[j] = true;
            up = tree.parents[j];
        }
        let (across_lo, across_hi) = skinned
            .iter()
            .zip(self.skin_joints.iter().zip(&self.skin_weights))
            .filter(|(p, (j, w))| {
                let k = (0..4).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap_or(0);
                w[k] > 0.0 && torso[self.binding_joint[j[k] as usize] as usize] && band(p)
            })
            .map(|(p, _)| (*p - spine).dot(side))
            .fold((f32::MAX, f32::MIN), |(a, b), x| (a.min(x), b.max(x)));
        let (centre, torso_width) = if across_lo <= across_hi {
            (0.5 * (across_lo + across_hi), across_hi - across_lo)
        } else {
            (0.0, 0.0)
        };
        let width = (l.distance(r) + 2.0 * arm).max(torso_width);
        let middle = spine + centre * side;
        let behind = skinned
            .iter()
            .filter(|p| (**p - middle).dot(side).abs() < 0.5 * width && band(p))
            .map(|p| (middle - *p).dot(forward))
            .fold(radius(joints.spine).unwrap_or(0.1), f32::max);
        let top = Vec3::new(middle.x, top_y, middle.z) - (behind + 0.02) * forward;
        let (cols, rows) = (cols.max(1), rows.max(1));
        let mut positions = Vec::new();
        for r in 0..=rows {
            for c in 0..=cols {
                let u = c as f32 / cols as f32 - 0.5;
                let v = r as f32 / rows as f32;
                positions.push(top + u * width * side - v * length * Vec3::Y);
            }
        }
        let n = cols + 1;
        let mut indices = Vec::new();
        for r in 0..rows {
            for c in 0..cols {
                let a = r * n + c;
                indices.extend([a, a + 1, a + n, a + 1, a + n + 1, a + n]);
            }
        }
        let w = if own_shoulders {
            shoulder_weight.clamp(0.0, 0.45)
        } else {
            0.0
        };
        let mut pins = Vec::new();
        for c in 0..=cols {
            pins.push((c, joints.spine, 1.0 - 2.0 * w));
            if w > 0.0 {
                pins.extend(joints.shoulders.map(|s| (c, s, w)));
            }
        }
        CapeLayout {
            positions,
            indices,
            pins,
            size: [width, length],
            forward,
        }
    }
}

/// The end radii of a tapered capsule over a joint's vertices (`local`, around `centroid` with
/// the unit `axis`, spanning `lo..hi` along it; see [`Character::fit_tapered_capsules`]) and
/// the position along the axis of the middle between the balls' centres; `None` where the span
/// is too short for two balls or the fit gives no positive radius (a plain capsule fits it).
fn end_radii(
    local: &[Vec3],
    centroid: Vec3,
    axis: Vec3,
    lo: f32,
    hi: f32,
    inset: f32,
) -> Option<(f32, f32, f32)> {
    // Least squares r = c0 + c1 t over the span, in f64 (sums of squares).
    let (mut n, mut st, mut sr, mut stt, mut str) = (0.0f64, 0.0, 0.0, 0.0, 0.0);
    for p in local {
        let d = *p - centroid;
        let t = d.dot(axis);
        if t >= lo && t <= hi {
            let (t, r) = (f64::from(t), f64::from((d - t * axis).length()));
            n += 1.0;
            st += t;
            sr += r;
            stt += t * t;
            str += t * r;
        }
    }
    let det = n * stt - st * st;
    if n < 2.0 || det <= 1e-12 * n * n {
        return None;
    }
    // The fitted line (slope, intercept), scaled by the inset.
    let slope = (n * str - st * sr) / det;
    let c0 = (sr - slope * st) / n * f64::from(inset);
    let c1 = slope * f64::from(inset);
    let (lo64, hi64) = (f64::from(lo), f64::from(hi));
    // Each radius is the line's value at its ball's centre: a = c0 + c1 (lo + a),
    // b = c0 + c1 (hi - b).
    let a = (c0 + c1 * lo64) / (1.0 - c1);
    let b = (c0 + c1 * hi64) / (1.0 + c1);
    let span = hi64 - lo64 - a - b;
    if !(a > 1e-3 && b > 1e-3 && span > 0.0) {
        return None;
    }
    // Bring the radii together about their mean until they differ by at most 90 % of the
    // distance between the centres (their sum, and so that distance, stays as it is).
    let (mean, half) = (
        0.5 * (a + b),
        (0.5 * (a - b)).clamp(-0.45 * span, 0.45 * span),
    );
    let (a, b) = (mean + half, mean - half);
    Some((a as f32, b as f32, (0.5 * (lo64 + a + hi64 - b)) as f32))
}

/// A node's name, or its mesh's, or `#index`.
fn name_of(n: &gltf::Node) -> String {
    n.name()
        .or_else(|| n.mesh().and_then(|m| m.name()))
        .map_or_else(|| format!("#{}", n.index()), str::to_string)
}

/// The skinned mesh of `node` as a [`SkinnedPart`] (its triangle primitives joined), its skin
/// slots mapped to the character's `joints` (skin joint -> node).
fn read_cloth<'a>(
    node: &gltf::Node,
    data: impl Fn(gltf::Buffer<'_>) -> Option<&'a [u8]> + Copy,
    joints: &[usize],
) -> Result<SkinnedPart, CharacterError> {
    let name = name_of(node);
    let bad = |attribute: &'static str, reason: String| CharacterError::BadAttribute {
        mesh: name.clone(),
        attribute,
        reason,
    };
    let (Some(mesh), Some(skin)) = (node.mesh(), node.skin()) else {
        return Err(CharacterError::ClothNotSkinned { mesh: name.clone() });
    };
    let slots: Vec<usize> = skin
        .joints()
        .map(|j| joints.iter().position(|&n| n == j.index()).unwrap_or(0))
        .collect();
    let count = slots.len();
    let inverse_bindposes: Vec<Mat4> = match skin.reader(data).read_inverse_bind_matrices() {
        Some(m) => m.map(|m| Mat4::from_cols_array_2d(&m)).collect(),
        None => vec![Mat4::IDENTITY; count],
    };
    if inverse_bindposes.len() != count {
        return Err(bad(
            "inverseBindMatrices",
            format!("{} matrices for {count} joints", inverse_bindposes.len()),
        ));
    }
    let mut cloth = SkinnedPart {
        name: name.clone(),
        positions: Vec::new(),
        indices: Vec::new(),
        joints: slots,
        inverse_bindposes,
        joint_indices: Vec::new(),
        joint_weights: Vec::new(),
        colors: None,
        max_distance: None,
    };
    let mut colors: Vec<[f32; 4]> = Vec::new();
    let mut all_coloured = true;
    let mut distances: Vec<f32> = Vec::new();
    let mut all_painted = true;
    for prim in mesh.primitives() {
        if prim.mode() != gltf::mesh::Mode::Triangles {
            continue;
        }
        let r = prim.reader(data);
        let base = cloth.positions.len() as u32;
        let p: Vec<Vec3> = r
            .read_positions()
            .ok_or_else(|| bad("POSITION", "missing".into()))?
            .map(Vec3::from)
            .collect();
        let n = p.len();
        let j: Vec<[u16; 4]> = r
            .read_joints(0)
            .ok_or_else(|| bad("JOINTS_0", "missing".into()))?
            .into_u16()
            .collect();
        let w: Vec<[f32; 4]> = r
            .read_weights(0)
            .ok_or_else(|| bad("WEIGHTS_0", "missing".into()))?
            .into_f32()
            .collect();
        if j.len() != n || w.len() != n {
            return Err(bad("JOINTS_0", "not one joint set per vertex".into()));
        }
        if let Some(k) = j.iter().flatten().find(|&&k| k as usize >= count) {
            return Err(bad(
                "JOINTS_0",
                format!("joint {k} past the skin's {count} joints"),
            ));
        }
        if let Some(v) = w
            .iter()
            .position(|w| w.iter().any(|x| !(x.is_finite() && *x >= 0.0)))
        {
            return Err(bad(
                "WEIGHTS_0",
                format!(
                    "vertex {} has a negative or non-finite weight",
                    base as usize + v
                ),
            ));
        }
        finite(
            &p.iter().flat_map(|p| p.to_array()).collect::<Vec<_>>(),
            || format!("the positions of the mesh {name:?}"),
        )?;
        match r.read_colors(0) {
            Some(c) => colors.extend(c.into_rgba_f32()),
            None => all_coloured = false,
        }
        match prim.get(&gltf::Semantic::Extras("MAX_DISTANCE".into())) {
            Some(a) => {
                if a.dimensions() != gltf::accessor::Dimensions::Scalar
                    || a.data_type() != gltf::accessor::DataType::F32
                {
                    return Err(bad(
                        "_MAX_DISTANCE",
                        format!(
                            "{:?} {:?}, not a float scalar (metres)",
                            a.data_type(),
                            a.dimensions()
                        ),
                    ));
                }
                let values: Vec<f32> = gltf::accessor::Iter::<f32>::new(a, data)
                    .ok_or_else(|| bad("_MAX_DISTANCE", "unreadable".into()))?
                    .collect();
                if values.len() != n {
                    return Err(bad(
                        "_MAX_DISTANCE",
                        format!("{} values for {n} vertices", values.len()),
                    ));
                }
                if let Some(v) = values.iter().position(|d| !(d.is_finite() && *d >= 0.0)) {
                    return Err(bad(
                        "_MAX_DISTANCE",
                        format!(
                            "vertex {} paints {} (metres, finite and >= 0)",
                            base as usize + v,
                            values[v]
                        ),
                    ));
                }
                distances.extend(values);
            }
            None => all_painted = false,
        }
        match r.read_indices() {
            Some(i) => {
                let start = cloth.indices.len();
                cloth.indices.extend(i.into_u32());
                if cloth.indices[start..].iter().any(|&k| k as usize >= n) {
                    return Err(bad("indices", "an index past the vertices".into()));
                }
                for k in &mut cloth.indices[start..] {
                    *k += base;
                }
            }
            None => cloth.indices.extend(base..base + n as u32),
        }
        cloth.positions.extend(p);
        cloth.joint_indices.extend(j);
        cloth.joint_weights.extend(w);
    }
    if cloth.positions.is_empty() {
        return Err(bad("POSITION", "no triangles".into()));
    }
    if all_coloured && colors.len() == cloth.positions.len() {
        cloth.colors = Some(colors);
    }
    if all_painted && distances.len() == cloth.positions.len() {
        cloth.max_distance = Some(distances);
    }
    Ok(cloth)
}

/// `m` without its scale: the rotation and translation.
pub fn rigid(m: &Mat4) -> Mat4 {
    let (_, r, t) = m.to_scale_rotation_translation();
    Mat4::from_rotation_translation(r.normalize(), t)
}

/// `m`'s rotation and translation as a pose.
pub fn pose_of_matrix(m: &Mat4) -> Pose {
    let (_, r, t) = m.to_scale_rotation_translation();
    Pose::new(t.as_dvec3(), r.as_dquat().normalize())
}

fn sample(ch: &Channel, t: f32) -> Vec4 {
    let times = &ch.times;
    let k = times.partition_point(|&x| x <= t);
    if k == 0 {
        return ch.values[0];
    }
    if k >= times.len() {
        return ch.values[times.len() - 1];
    }
    let (a, b) = (ch.values[k - 1], ch.values[k]);
    if ch.step {
        return a;
    }
    let span = times[k] - times[k - 1];
    let s = if span > 0.0 {
        (t - times[k - 1]) / span
    } else {
        0.0
    };
    if ch.part == Part::Rotation {
        let b = if a.dot(b) < 0.0 { -b } else { b };
        a.lerp(b, s).normalize()
    } else {
        a.lerp(b, s)
    }
}
