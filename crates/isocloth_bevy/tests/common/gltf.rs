//! Writing small binary glTF files in tests: buffers and accessors, and a skinned humanoid
//! whose first clip frame, root scale and joint layout are chosen by the test.

#![allow(dead_code)]

use glam::{Mat4, Quat, Vec3};

/// Binary data and the accessors over it, as the builder writes them.
#[derive(Default)]
pub struct Bin {
    pub bytes: Vec<u8>,
    pub views: Vec<String>,
    pub accessors: Vec<String>,
}

impl Bin {
    /// Appends `data` as a buffer view and an accessor (`extra`: the accessor's other JSON
    /// fields); returns the accessor's index.
    pub fn push(&mut self, data: Vec<u8>, extra: String) -> usize {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
        self.views.push(format!(
            r#"{{"buffer":0,"byteOffset":{},"byteLength":{}}}"#,
            self.bytes.len(),
            data.len()
        ));
        self.bytes.extend(data);
        self.accessors.push(format!(
            r#"{{"bufferView":{},{extra}}}"#,
            self.views.len() - 1
        ));
        self.accessors.len() - 1
    }
}

/// Little-endian bytes of `v`.
pub fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A binary glTF of `json` (with `BUFFER` where the buffer's entry goes) and `bin`.
pub fn glb(json: &str, bin: &[u8]) -> Vec<u8> {
    let mut json = json
        .replace("BUFFER", &format!(r#"{{"byteLength":{}}}"#, bin.len()))
        .into_bytes();
    while !json.len().is_multiple_of(4) {
        json.push(b' ');
    }
    let mut bin = bin.to_vec();
    while !bin.len().is_multiple_of(4) {
        bin.push(0);
    }
    let total = 12 + 8 + json.len() + 8 + bin.len();
    let mut out = Vec::with_capacity(total);
    out.extend(b"glTF");
    out.extend(2u32.to_le_bytes());
    out.extend((total as u32).to_le_bytes());
    out.extend((json.len() as u32).to_le_bytes());
    out.extend(b"JSON");
    out.extend(json);
    out.extend((bin.len() as u32).to_le_bytes());
    out.extend(b"BIN\0");
    out.extend(bin);
    out
}

/// How [`humanoid_glb`] builds its character.
#[derive(Clone, Copy, Debug)]
pub struct Rig {
    /// The scale of the `Armature` node above the skeleton: joint translations and vertex
    /// positions are written in metres divided by it (0.01: centimetres, as many exporters
    /// write), so the character stands 1.75 m tall whatever it is.
    pub root_scale: f32,
    /// The clip's first frame is far from the bind pose: both arms raised 120 degrees, the
    /// spine bent 35 degrees forward, the hips turned 100 degrees about the vertical. The clip
    /// eases back to the bind pose over its first second and holds it for the next.
    pub far_first_frame: bool,
    /// The upper spine joint sits 6 cm to the character's right of the body's midline (its
    /// children compensate), as in rigs whose joints are not symmetric about the spine.
    pub offset_spine: bool,
    /// No joint with three or more children (the shoulders hang from a second chest joint).
    pub no_branching_joint: bool,
    /// The skeleton's origin is at the hips (the feet 0.95 m below it), not at the feet.
    pub origin_at_hips: bool,
}

impl Default for Rig {
    fn default() -> Self {
        Self {
            root_scale: 1.0,
            far_first_frame: false,
            offset_spine: false,
            no_branching_joint: false,
            origin_at_hips: false,
        }
    }
}

/// The joints' names, parents (joint index) and bind translations from the parent (metres);
/// the body faces +Z (its toes point there), its left is +X.
fn skeleton(rig: Rig) -> Vec<(&'static str, Option<usize>, Vec3)> {
    let off = if rig.offset_spine { -0.06 } else { 0.0 };
    let mut j = vec![
        (
            "Hips",
            None,
            Vec3::new(0.0, if rig.origin_at_hips { 0.0 } else { 0.95 }, 0.0),
        ),
        ("Spine", Some(0), Vec3::new(0.0, 0.12, 0.0)),
        ("Chest", Some(1), Vec3::new(off, 0.22, -0.02)),
        ("Neck", Some(2), Vec3::new(-off, 0.2, 0.0)),
        ("Head", Some(3), Vec3::new(0.0, 0.1, 0.0)),
        ("LeftShoulder", Some(2), Vec3::new(0.06 - off, 0.16, 0.0)),
        ("LeftArm", Some(5), Vec3::new(0.12, 0.0, 0.0)),
        ("LeftForeArm", Some(6), Vec3::new(0.28, 0.0, 0.0)),
        ("RightShoulder", Some(2), Vec3::new(-0.06 - off, 0.16, 0.0)),
        ("RightArm", Some(8), Vec3::new(-0.12, 0.0, 0.0)),
        ("RightForeArm", Some(9), Vec3::new(-0.28, 0.0, 0.0)),
        ("LeftUpLeg", Some(0), Vec3::new(0.1, -0.05, 0.0)),
        ("LeftLeg", Some(11), Vec3::new(0.0, -0.42, 0.0)),
        ("LeftFoot", Some(12), Vec3::new(0.0, -0.4, 0.0)),
        ("LeftToe", Some(13), Vec3::new(0.0, -0.06, 0.14)),
        ("RightUpLeg", Some(0), Vec3::new(-0.1, -0.05, 0.0)),
        ("RightLeg", Some(15), Vec3::new(0.0, -0.42, 0.0)),
        ("RightFoot", Some(16), Vec3::new(0.0, -0.4, 0.0)),
        ("RightToe", Some(17), Vec3::new(0.0, -0.06, 0.14)),
    ];
    if rig.no_branching_joint {
        // The left shoulder hangs from the chest, the neck and the right shoulder from an upper
        // chest joint at the same place: no joint but the hips has three children.
        j[3].1 = Some(19);
        j[8].1 = Some(19);
        j.push(("UpperChest", Some(2), Vec3::ZERO));
    }
    j
}

/// The limbs' tubes: (joint that owns them, from, to (bind, world metres), radius across the
/// side axis, radius front to back).
fn tubes(bind: &[Vec3]) -> Vec<(usize, Vec3, Vec3, f32, f32)> {
    let up = |j: usize, h: f32| bind[j] + Vec3::new(0.0, h, 0.0);
    let mid = Vec3::new(0.0, bind[2].y, bind[2].z);
    vec![
        (
            0,
            Vec3::new(0.0, bind[0].y - 0.08, 0.0),
            Vec3::new(0.0, bind[1].y, 0.0),
            0.15,
            0.1,
        ),
        (1, Vec3::new(0.0, bind[1].y, 0.0), mid, 0.15, 0.1),
        (2, mid, Vec3::new(0.0, bind[3].y, mid.z), 0.17, 0.11),
        (3, bind[3], bind[4], 0.05, 0.05),
        (4, bind[4], up(4, 0.22), 0.09, 0.1),
        (5, bind[5], bind[6], 0.05, 0.05),
        (6, bind[6], bind[7], 0.05, 0.05),
        (7, bind[7], bind[7] + Vec3::new(0.26, 0.0, 0.0), 0.04, 0.04),
        (8, bind[8], bind[9], 0.05, 0.05),
        (9, bind[9], bind[10], 0.05, 0.05),
        (
            10,
            bind[10],
            bind[10] + Vec3::new(-0.26, 0.0, 0.0),
            0.04,
            0.04,
        ),
        (11, bind[11], bind[12], 0.08, 0.08),
        (12, bind[12], bind[13], 0.06, 0.06),
        (13, bind[13], bind[14], 0.05, 0.05),
        (15, bind[15], bind[16], 0.08, 0.08),
        (16, bind[16], bind[17], 0.06, 0.06),
        (17, bind[17], bind[18], 0.05, 0.05),
    ]
}

/// A skinned humanoid 1.75 m tall as a binary glTF (see [`Rig`]): 19 joints (20 with
/// `no_branching_joint`) under an `Armature` node, a body of elliptic tubes each skinned
/// rigidly to one joint, and a 2 s clip `Start` (the bind pose throughout, or with
/// `far_first_frame` a first frame far from it).
pub fn humanoid_glb(rig: Rig) -> Vec<u8> {
    let joints = skeleton(rig);
    let n = joints.len();
    let k = 1.0 / rig.root_scale;
    // Bind world positions (metres) of the joints (no rotations at bind).
    let mut bind = vec![Vec3::ZERO; n];
    let mut placed = vec![false; n];
    while placed.iter().any(|p| !p) {
        for (i, (_, parent, t)) in joints.iter().enumerate() {
            match parent {
                None => {
                    bind[i] = *t;
                    placed[i] = true;
                }
                Some(p) if placed[*p] && !placed[i] => {
                    bind[i] = bind[*p] + *t;
                    placed[i] = true;
                }
                _ => {}
            }
        }
    }
    let mut bin = Bin::default();
    // Body vertices in mesh space (metres times k), skinned rigidly.
    let (mut pos, mut jix, mut wts, mut idx) = (vec![], vec![], vec![], vec![]);
    let (rings, around) = (6u32, 10u32);
    for (owner, a, b, rx, rz) in tubes(&bind) {
        let axis = (b - a).normalize();
        let side = if axis.x.abs() > 0.9 { Vec3::Y } else { Vec3::X };
        let e1 = (side - side.dot(axis) * axis).normalize();
        let e2 = axis.cross(e1);
        let base = (pos.len() / 3) as u32;
        for r in 0..rings {
            let c = a.lerp(b, r as f32 / (rings - 1) as f32);
            for q in 0..around {
                let t = q as f32 / around as f32 * std::f32::consts::TAU;
                let (r1, r2) = if side == Vec3::X { (rx, rz) } else { (rz, rz) };
                let p = c + r1 * t.cos() * e1 + r2 * t.sin() * e2;
                pos.extend((p * k).to_array());
                jix.extend([owner as u16, 0, 0, 0]);
                wts.extend([1.0f32, 0.0, 0.0, 0.0]);
            }
        }
        for r in 0..rings - 1 {
            for q in 0..around {
                let (s, t) = (base + r * around + q, base + r * around + (q + 1) % around);
                idx.extend([s, t, s + around, t, t + around, s + around]);
            }
        }
    }
    let count = pos.len() / 3;
    let (mut lo, mut hi) = ([f32::MAX; 3], [f32::MIN; 3]);
    for p in pos.chunks(3) {
        for d in 0..3 {
            lo[d] = lo[d].min(p[d]);
            hi[d] = hi[d].max(p[d]);
        }
    }
    let p = bin.push(
        f32s(&pos),
        format!(r#""componentType":5126,"count":{count},"type":"VEC3","min":{lo:?},"max":{hi:?}"#),
    );
    let j = bin.push(
        jix.iter().flat_map(|x| x.to_le_bytes()).collect(),
        format!(r#""componentType":5123,"count":{count},"type":"VEC4""#),
    );
    let w = bin.push(
        f32s(&wts),
        format!(r#""componentType":5126,"count":{count},"type":"VEC4""#),
    );
    let i = bin.push(
        idx.iter().flat_map(|x| x.to_le_bytes()).collect(),
        format!(
            r#""componentType":5125,"count":{},"type":"SCALAR""#,
            idx.len()
        ),
    );
    // Inverse bind: mesh space (metres times k) to the joint's frame. The joint's world
    // transform at bind is S(root_scale) T(bind * k); a mesh-space point v is at world
    // root_scale * v, so IBM = T(-bind * k).
    let ibm: Vec<f32> = bind
        .iter()
        .flat_map(|b| Mat4::from_translation(-*b * k).to_cols_array())
        .collect();
    let m = bin.push(
        f32s(&ibm),
        format!(r#""componentType":5126,"count":{n},"type":"MAT4""#),
    );
    // The clip: rotations of hips, spine and both arms at 0, 1 and 2 s.
    let times = bin.push(
        f32s(&[0.0, 1.0, 2.0]),
        r#""componentType":5126,"count":3,"type":"SCALAR","min":[0],"max":[2]"#.to_string(),
    );
    let far = rig.far_first_frame;
    let key = |q: Quat| [q.x, q.y, q.z, q.w];
    let rotations: Vec<(usize, Quat)> = vec![
        (
            0,
            Quat::from_rotation_y(if far { 100f32.to_radians() } else { 0.0 }),
        ),
        (
            1,
            Quat::from_rotation_x(if far { 35f32.to_radians() } else { 0.0 }),
        ),
        (
            6,
            Quat::from_rotation_z(if far { 120f32.to_radians() } else { 0.0 }),
        ),
        (
            9,
            Quat::from_rotation_z(if far { -120f32.to_radians() } else { 0.0 }),
        ),
    ];
    let mut channels = Vec::new();
    let mut samplers = Vec::new();
    for (s, (joint, q0)) in rotations.iter().enumerate() {
        let mut v = Vec::new();
        v.extend(key(*q0));
        v.extend(key(Quat::IDENTITY));
        v.extend(key(Quat::IDENTITY));
        let out = bin.push(
            f32s(&v),
            r#""componentType":5126,"count":3,"type":"VEC4""#.to_string(),
        );
        // Joint i is node i + 1 (node 0 is the Armature).
        channels.push(format!(
            r#"{{"sampler":{s},"target":{{"node":{},"path":"rotation"}}}}"#,
            joint + 1
        ));
        samplers.push(format!(r#"{{"input":{times},"output":{out}}}"#));
    }
    let mut nodes = vec![format!(
        r#"{{"name":"Armature","scale":[{s},{s},{s}],"children":[1]}}"#,
        s = rig.root_scale
    )];
    for (i, (name, _, t)) in joints.iter().enumerate() {
        let children: Vec<String> = joints
            .iter()
            .enumerate()
            .filter(|(_, c)| c.1 == Some(i))
            .map(|(c, _)| (c + 1).to_string())
            .collect();
        let kids = if children.is_empty() {
            String::new()
        } else {
            format!(r#","children":[{}]"#, children.join(","))
        };
        let t = *t * k;
        nodes.push(format!(
            r#"{{"name":"{name}","translation":[{},{},{}]{kids}}}"#,
            t.x, t.y, t.z
        ));
    }
    nodes.push(r#"{"name":"Body","mesh":0,"skin":0}"#.to_string());
    let joint_nodes: Vec<String> = (1..=n).map(|j| j.to_string()).collect();
    let json = format!(
        r#"{{"asset":{{"version":"2.0"}},"scene":0,"scenes":[{{"nodes":[0,{body}]}}],
"nodes":[{nodes}],
"meshes":[{{"primitives":[{{"attributes":{{"POSITION":{p},"JOINTS_0":{j},"WEIGHTS_0":{w}}},"indices":{i}}}]}}],
"skins":[{{"joints":[{joint_nodes}],"inverseBindMatrices":{m},"skeleton":1}}],
"animations":[{{"name":"Start","channels":[{channels}],"samplers":[{samplers}]}}],
"accessors":[{accessors}],
"bufferViews":[{views}],"buffers":[BUFFER]}}"#,
        body = n + 1,
        nodes = nodes.join(",\n"),
        joint_nodes = joint_nodes.join(","),
        channels = channels.join(","),
        samplers = samplers.join(","),
        accessors = bin.accessors.join(",\n"),
        views = bin.views.join(","),
    );
    glb(&json, &bin.bytes)
}
