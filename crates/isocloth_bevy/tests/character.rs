//! The glTF character: loading, clips, skinning, the capsule fit and the cape's joints, on a
//! small skinned cylinder written here and on the shipped `assets/CesiumMan.glb`; bad files end
//! in typed errors.

use glam::{Mat4, Quat, Vec3};
use isocloth::ColliderShape;
use isocloth_bevy::character::{Character, CharacterError};

/// What to break or change in [`cylinder_glb`].
#[derive(Default, Clone, Copy)]
struct Faults {
    no_skin: bool,
    nan_keyframe: bool,
    /// The body in two skinned meshes (rings 0-5 and 5-10, the seam ring in both, as converters
    /// split a body), the second on a skin of its own that lists the joints in reverse order.
    split: bool,
    /// The radius narrows from 0.1 m at the root to 0.05 m at the far end (a limb).
    taper: bool,
}

/// Binary data and the accessors over it, as the builder writes them.
#[derive(Default)]
struct Bin {
    bytes: Vec<u8>,
    views: Vec<String>,
    accessors: Vec<String>,
}

impl Bin {
    /// Appends `data` as a buffer view and an accessor (`extra`: the accessor's other JSON
    /// fields); returns the accessor's index.
    fn push(&mut self, data: Vec<u8>, extra: String) -> usize {
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

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A 1 m cylinder of radius 0.1 m along +Y (11 rings of 12 vertices), skinned to two joints
/// (`root` at the origin owns the lower half, `elbow` at 0.5 m the upper), and a clip `Bend`
/// turning `elbow` 90 degrees about Z over 1 s: the glTF JSON with `BUFFER` where the buffer's
/// entry goes, and the binary data.
fn cylinder(f: Faults) -> (String, Vec<u8>) {
    let (rings, around) = (11u32, 12u32);
    let mut bin = Bin::default();
    let ibm = [
        Mat4::IDENTITY,
        Mat4::from_translation(Vec3::new(0.0, -0.5, 0.0)),
    ];
    // One part per ring range; `reverse`: its skin lists the joints as [elbow, root].
    let part = |bin: &mut Bin, first: u32, last: u32, reverse: bool| {
        let (mut pos, mut joints, mut weights, mut idx) = (vec![], vec![], vec![], vec![]);
        for r in first..=last {
            let y = r as f32 / (rings - 1) as f32;
            for k in 0..around {
                let a = k as f32 / around as f32 * std::f32::consts::TAU;
                let radius = if f.taper { 0.1 * (1.0 - 0.5 * y) } else { 0.1 };
                pos.extend([radius * a.cos(), y, radius * a.sin()]);
                let upper = y >= 0.5;
                joints.extend([u16::from(upper != reverse), 0, 0, 0]);
                weights.extend([1.0f32, 0.0, 0.0, 0.0]);
            }
        }
        for r in 0..last - first {
            for k in 0..around {
                let (a, b) = (r * around + k, r * around + (k + 1) % around);
                idx.extend([a, a + around, b, b, a + around, b + around]);
            }
        }
        let n = pos.len() / 3;
        let (lo, hi) = (
            [-0.1f32, first as f32 / 10.0, -0.1],
            [0.1f32, last as f32 / 10.0, 0.1],
        );
        let p = bin.push(
            f32s(&pos),
            format!(r#""componentType":5126,"count":{n},"type":"VEC3","min":{lo:?},"max":{hi:?}"#),
        );
        let j = bin.push(
            joints.iter().flat_map(|x| x.to_le_bytes()).collect(),
            format!(r#""componentType":5123,"count":{n},"type":"VEC4""#),
        );
        let w = bin.push(
            f32s(&weights),
            format!(r#""componentType":5126,"count":{n},"type":"VEC4""#),
        );
        let i = bin.push(
            idx.iter().flat_map(|x| x.to_le_bytes()).collect(),
            format!(
                r#""componentType":5125,"count":{},"type":"SCALAR""#,
                idx.len()
            ),
        );
        let order = if reverse { [ibm[1], ibm[0]] } else { ibm };
        let m = bin.push(
            f32s(
                &order
                    .iter()
                    .flat_map(|m| m.to_cols_array())
                    .collect::<Vec<_>>(),
            ),
            r#""componentType":5126,"count":2,"type":"MAT4""#.to_string(),
        );
        (
            format!(
                r#"{{"primitives":[{{"attributes":{{"POSITION":{p},"JOINTS_0":{j},"WEIGHTS_0":{w}}},"indices":{i}}}]}}"#
            ),
            format!(
                r#"{{"joints":{},"inverseBindMatrices":{m}}}"#,
                if reverse { "[1,0]" } else { "[0,1]" }
            ),
        )
    };
    let parts = if f.split {
        vec![part(&mut bin, 0, 5, false), part(&mut bin, 5, 10, true)]
    } else {
        vec![part(&mut bin, 0, 10, false)]
    };
    let times = bin.push(
        f32s(&[0.0, 1.0]),
        r#""componentType":5126,"count":2,"type":"SCALAR","min":[0],"max":[1]"#.to_string(),
    );
    let q = Quat::from_rotation_z(std::f32::consts::FRAC_PI_2);
    let rot = bin.push(
        f32s(&[0.0, 0.0, 0.0, 1.0, q.x, q.y, q.z, q.w]),
        r#""componentType":5126,"count":2,"type":"VEC4""#.to_string(),
    );
    let bad = if f.nan_keyframe { f32::NAN } else { 0.5 };
    let tr = bin.push(
        f32s(&[0.0, 0.5, 0.0, 0.0, bad, 0.0]),
        r#""componentType":5126,"count":2,"type":"VEC3""#.to_string(),
    );
    while !bin.bytes.len().is_multiple_of(4) {
        bin.bytes.push(0);
    }
    let mesh_nodes: Vec<String> = (0..parts.len())
        .map(|k| {
            let skin = if f.no_skin {
                String::new()
            } else {
                format!(r#","skin":{k}"#)
            };
            format!(r#"{{"mesh":{k}{skin}}}"#)
        })
        .collect();
    let scene_nodes: Vec<String> = std::iter::once(0)
        .chain(2..2 + parts.len())
        .map(|k| k.to_string())
        .collect();
    let json = format!(
        r#"{{"asset":{{"version":"2.0"}},"scene":0,"scenes":[{{"nodes":[{scene}]}}],
"nodes":[{{"name":"root","children":[1]}},{{"name":"elbow","translation":[0,0.5,0]}},{mesh_nodes}],
"meshes":[{meshes}],
"skins":[{skins}],
"animations":[{{"name":"Bend","channels":[{{"sampler":0,"target":{{"node":1,"path":"rotation"}}}},{{"sampler":1,"target":{{"node":1,"path":"translation"}}}}],
"samplers":[{{"input":{times},"output":{rot}}},{{"input":{times},"output":{tr}}}]}}],
"accessors":[{accessors}],
"bufferViews":[{views}],"buffers":[BUFFER]}}"#,
        scene = scene_nodes.join(","),
        mesh_nodes = mesh_nodes.join(","),
        meshes = parts
            .iter()
            .map(|p| p.0.as_str())
            .collect::<Vec<_>>()
            .join(","),
        skins = parts
            .iter()
            .map(|p| p.1.as_str())
            .collect::<Vec<_>>()
            .join(","),
        accessors = bin.accessors.join(",\n"),
        views = bin.views.join(","),
    );
    (json, bin.bytes)
}

/// [`cylinder`] as a binary glTF.
fn cylinder_glb(f: Faults) -> Vec<u8> {
    let (json, bin) = cylinder(f);
    let mut json = json
        .replace("BUFFER", &format!(r#"{{"byteLength":{}}}"#, bin.len()))
        .into_bytes();
    while !json.len().is_multiple_of(4) {
        json.push(b' ');
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

/// [`cylinder`] as a `.gltf` whose buffer is the URI `uri` (written as given).
fn cylinder_gltf(f: Faults, uri: &str) -> (Vec<u8>, Vec<u8>) {
    let (json, bin) = cylinder(f);
    let buffer = format!(r#"{{"byteLength":{},"uri":"{uri}"}}"#, bin.len());
    (json.replace("BUFFER", &buffer).into_bytes(), bin)
}

/// Standard base64 with padding, for the data-URI test.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let v = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(v >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Skinned positions at time `t` of the `Bend` clip.
fn skinned_at(c: &Character, t: f32) -> Vec<Vec3> {
    let clip = c.clip(Some("Bend")).unwrap();
    let (mut joints, mut skinned) = (Vec::new(), Vec::new());
    c.joint_transforms(Some(clip), t, &mut joints);
    c.skin(&joints, &mut skinned);
    skinned
}

/// The cylinder loads with its two named joints and its clip; at the clip's end the upper half
/// has turned 90 degrees about the elbow: the top ring's centre, 0.5 m above the elbow at
/// rest, is 0.5 m to the elbow's -X side (to 1e-5 m); at the rest pose skinning gives the mesh
/// back.
#[test]
fn a_skinned_cylinder_bends_with_its_clip() {
    let c = Character::from_glb(&cylinder_glb(Faults::default())).unwrap();
    assert_eq!(c.joint_names(), ["root", "elbow"]);
    let clip = c.clip(Some("Bend")).unwrap();
    assert_eq!(c.clips()[clip].duration, 1.0);
    assert_eq!(c.clip(None).unwrap(), clip);
    let mut joints = Vec::new();
    let mut skinned = Vec::new();
    c.joint_transforms(None, 0.0, &mut joints);
    c.skin(&joints, &mut skinned);
    let top_rest: Vec3 = skinned[120..132].iter().sum::<Vec3>() / 12.0;
    assert!(
        top_rest.distance(Vec3::new(0.0, 1.0, 0.0)) < 1e-5,
        "{top_rest}"
    );
    c.joint_transforms(Some(clip), 0.999_999, &mut joints);
    c.skin(&joints, &mut skinned);
    let top: Vec3 = skinned[120..132].iter().sum::<Vec3>() / 12.0;
    assert!(top.distance(Vec3::new(-0.5, 0.5, 0.0)) < 1e-4, "{top}");
}

/// The capsule fit on the cylinder: one capsule per joint, its axis along the cylinder (to 1e-3
/// in the direction), its radius the cylinder's times the inset (to 1 %), its ends within the
/// joint's half of the cylinder.
#[test]
fn capsules_fit_the_limb_they_are_fitted_to() {
    let c = Character::from_glb(&cylinder_glb(Faults::default())).unwrap();
    let caps = c.fit_capsules(10, 0.9);
    assert_eq!(caps.len(), 2);
    for cap in &caps {
        let ColliderShape::Capsule {
            half_height,
            radius,
        } = cap.shape
        else {
            panic!("not a capsule")
        };
        assert!((radius - 0.09).abs() < 0.09 * 0.01, "radius {radius}");
        let axis = cap.offset.rotation * glam::DVec3::Y;
        assert!(axis.x.abs() < 1e-3 && axis.z.abs() < 1e-3, "axis {axis}");
        assert!(
            half_height + radius <= 0.25 + 1e-6,
            "half length {}",
            half_height + radius
        );
        assert!(half_height > 0.05, "half height {half_height}");
    }
}

/// The tapered fit follows a limb that narrows: on the tapered cylinder (radius 0.1 m at the
/// root, 0.05 m at the far end) each joint's two balls have, at their centres' heights, the
/// skin's radius there times the inset (to 4 %), the one nearer the root the larger; on the
/// straight cylinder both radii are the plain fit's (to 2 %) and the axes are the plain fit's.
#[test]
fn tapered_capsules_follow_a_narrowing_limb() {
    let limb = Character::from_glb(&cylinder_glb(Faults {
        taper: true,
        ..Default::default()
    }))
    .unwrap();
    let caps = limb.fit_tapered_capsules(10, 0.9);
    assert_eq!(caps.len(), 2);
    for cap in &caps {
        let ColliderShape::TaperedCapsule {
            half_height,
            bottom_radius,
            top_radius,
        } = cap.shape
        else {
            panic!("not a tapered capsule: {:?}", cap.shape)
        };
        // The joints' frames are translations (the rest pose), so the offset is in the world's
        // axes up to the joint's origin; heights compare through the axis' direction.
        let axis = cap.offset.rotation * glam::DVec3::Y;
        assert!(axis.x.abs() < 1e-3 && axis.z.abs() < 1e-3, "axis {axis}");
        let joint_y = if cap.joint == 0 { 0.0 } else { 0.5 };
        for (end, radius) in [(-1.0, bottom_radius), (1.0, top_radius)] {
            let y = joint_y + cap.offset.translation.y + end * half_height * axis.y;
            let skin = 0.1 * (1.0 - 0.5 * y);
            assert!(
                (radius - 0.9 * skin).abs() < 0.04 * 0.9 * skin,
                "joint {}: radius {radius} at y {y}, skin {skin}",
                cap.joint
            );
        }
        let (near_root, far) = if axis.y > 0.0 {
            (bottom_radius, top_radius)
        } else {
            (top_radius, bottom_radius)
        };
        assert!(near_root > far, "{near_root} <= {far}");
    }
    let straight = Character::from_glb(&cylinder_glb(Faults::default())).unwrap();
    for (plain, tapered) in straight
        .fit_capsules(10, 0.9)
        .iter()
        .zip(straight.fit_tapered_capsules(10, 0.9))
    {
        let ColliderShape::Capsule { radius, .. } = plain.shape else {
            panic!("not a capsule")
        };
        let ColliderShape::TaperedCapsule {
            bottom_radius,
            top_radius,
            ..
        } = tapered.shape
        else {
            panic!("not a tapered capsule")
        };
        for r in [bottom_radius, top_radius] {
            assert!((r - radius).abs() < 0.02 * radius, "{r} against {radius}");
        }
        assert!(
            plain.offset.rotation.angle_between(tapered.offset.rotation) < 1e-6,
            "axes differ"
        );
    }
}

/// A missing clip names the clips there are; a mesh without a skin, a NaN keyframe, a
/// truncated file, an outside buffer read without its folder, a missing buffer file and a
/// data URI that is not base64 each give their typed error, naming what is wrong.
#[test]
fn bad_files_get_typed_errors() {
    let c = Character::from_glb(&cylinder_glb(Faults::default())).unwrap();
    match c.clip(Some("Run")) {
        Err(CharacterError::NoSuchClip { name, available }) => {
            assert_eq!(name, "Run");
            assert_eq!(available, ["Bend"]);
        }
        other => panic!("{other:?}"),
    }
    let no_skin = Character::from_glb(&cylinder_glb(Faults {
        no_skin: true,
        ..Default::default()
    }));
    assert!(
        matches!(no_skin, Err(CharacterError::NoSkin)),
        "{no_skin:?}"
    );
    let nan = Character::from_glb(&cylinder_glb(Faults {
        nan_keyframe: true,
        ..Default::default()
    }));
    assert!(matches!(nan, Err(CharacterError::NonFinite(_))), "{nan:?}");
    let bytes = cylinder_glb(Faults::default());
    let cut = Character::from_glb(&bytes[..bytes.len() / 2]);
    assert!(matches!(cut, Err(CharacterError::Gltf(_))), "{cut:?}");
    let (json, _) = cylinder_gltf(Faults::default(), "cylinder.bin");
    match Character::from_glb(&json) {
        Err(CharacterError::OutsideBuffer { buffer: 0, uri }) => assert_eq!(uri, "cylinder.bin"),
        other => panic!("{other:?}"),
    }
    let dir = std::env::temp_dir().join(format!("isocloth-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("c.gltf"), &json).unwrap();
    match Character::from_file(dir.join("c.gltf")) {
        Err(e @ CharacterError::MissingBuffer { .. }) => {
            assert!(e.to_string().contains("cylinder.bin"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let (bad, _) = cylinder_gltf(
        Faults::default(),
        "data:application/octet-stream;base64,A*B",
    );
    assert!(
        matches!(
            Character::from_glb(&bad),
            Err(CharacterError::BadDataUri { buffer: 0, .. })
        ),
        "{:?}",
        Character::from_glb(&bad)
    );
    // The cylinder has no chest: no cape joints.
    assert!(matches!(c.cape_joints(), Err(CharacterError::NoUpperSpine)));
}

/// The shipped Cesium Man (19 joints, a 2 s walk): the cape hangs from the joint that parents
/// the neck and both arms and from the two arms' first joints; he faces +X (his toes point
/// there); every joint dominating 30 or more vertices gets a capsule (18 of 19: not the lower
/// spine); the walk swings his feet apart by over 0.4 m.
#[test]
fn cesium_man_walks_and_gets_his_cape_joints() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets/CesiumMan.glb");
    let c = Character::from_glb(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(c.joint_names().len(), 19);
    let walk = c.clip(Some("Walk")).unwrap();
    assert!((c.clips()[walk].duration - 2.0).abs() < 1e-6);
    let cape = c.cape_joints().unwrap();
    let names = c.joint_names();
    assert_eq!(names[cape.spine], "torso_joint_3");
    let mut shoulders = cape.shoulders.map(|s| names[s].as_str());
    shoulders.sort();
    assert_eq!(
        shoulders,
        ["Skeleton_arm_joint_L__4_", "Skeleton_arm_joint_R"]
    );
    assert!(cape.forward.distance(Vec3::X) < 1e-2, "{}", cape.forward);
    assert_eq!(c.fit_capsules(30, 0.9).len(), 18);
    let mut joints = Vec::new();
    let mut feet_apart = 0.0f32;
    let foot = |n: &str| names.iter().position(|x| x == n).unwrap();
    let (l, r) = (foot("leg_joint_L_5"), foot("leg_joint_R_5"));
    for k in 0..120 {
        c.joint_transforms(Some(walk), k as f32 / 60.0, &mut joints);
        let d = (joints[l].w_axis - joints[r].w_axis).truncate();
        feet_apart = feet_apart.max(d.x.abs());
    }
    assert!(feet_apart > 0.4, "feet apart {feet_apart} m");
}

/// A body split into two skinned meshes on two skins (the second listing the joints in reverse
/// order, the seam ring in both parts): both parts are read (132 + 12 vertices, the same 240
/// triangles), the joints are the same two, every vertex skins to where the one-piece
/// cylinder's vertex at the same rest position goes at every time of the clip (to 1e-5 m), and
/// both joints get a capsule of the same radius (to 1 %).
#[test]
fn every_skinned_mesh_of_a_split_body_is_read_and_skinned() {
    let whole = Character::from_glb(&cylinder_glb(Faults::default())).unwrap();
    let split = Character::from_glb(&cylinder_glb(Faults {
        split: true,
        ..Default::default()
    }))
    .unwrap();
    assert_eq!(split.joint_names(), ["root", "elbow"]);
    assert_eq!(split.vertex_count(), whole.vertex_count() + 12);
    assert_eq!(split.indices().len(), whole.indices().len());
    let rest_whole = skinned_at(&whole, 0.0);
    let rest_split = skinned_at(&split, 0.0);
    for t in [0.0, 0.3, 0.7, 0.999] {
        let (a, b) = (skinned_at(&whole, t), skinned_at(&split, t));
        for (k, p) in rest_split.iter().enumerate() {
            let twin = rest_whole
                .iter()
                .position(|q| q.distance(*p) < 1e-6)
                .unwrap();
            assert!(a[twin].distance(b[k]) < 1e-5, "t {t} vertex {k}");
        }
    }
    let (cw, cs) = (whole.fit_capsules(10, 0.9), split.fit_capsules(10, 0.9));
    assert_eq!(cs.len(), 2);
    for (a, b) in cw.iter().zip(&cs) {
        let radius = |s: &ColliderShape| match *s {
            ColliderShape::Capsule { radius, .. } => radius,
            _ => panic!("not a capsule"),
        };
        assert_eq!(a.joint, b.joint);
        assert!((radius(&a.shape) - radius(&b.shape)).abs() < 0.01 * radius(&a.shape));
    }
}

/// The same character from a `.glb`, from a `.gltf` with a `.bin` beside it (its URI
/// percent-escaped, as exporters write a name with a space) and from a `.gltf` with a base64
/// data URI: the same joints, triangles and skinned positions at the clip's middle (exactly).
#[test]
fn glb_gltf_with_bin_and_data_uri_load_the_same_character() {
    let f = Faults {
        split: true,
        ..Default::default()
    };
    let glb = Character::from_glb(&cylinder_glb(f)).unwrap();
    let dir = std::env::temp_dir().join(format!("isocloth-gltf-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let (json, bin) = cylinder_gltf(f, "sub/cyl%20body.bin");
    std::fs::write(dir.join("body.gltf"), &json).unwrap();
    std::fs::write(dir.join("sub/cyl body.bin"), &bin).unwrap();
    let beside = Character::from_file(dir.join("body.gltf")).unwrap();
    std::fs::write(dir.join("body.glb"), cylinder_glb(f)).unwrap();
    let glb_file = Character::from_file(dir.join("body.glb")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let uri = format!("data:application/octet-stream;base64,{}", base64(&bin));
    let (embedded, _) = cylinder_gltf(f, &uri);
    let embedded = Character::from_glb(&embedded).unwrap();
    for c in [&beside, &glb_file, &embedded] {
        assert_eq!(c.joint_names(), glb.joint_names());
        assert_eq!(c.indices(), glb.indices());
        assert_eq!(skinned_at(c, 0.5), skinned_at(&glb, 0.5));
    }
}
