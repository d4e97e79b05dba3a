//! The glTF character: loading, clips, skinning, the capsule fit and the cape's joints, on a
//! small skinned cylinder written here and on the shipped `assets/CesiumMan.glb`; bad files end
//! in typed errors.

use glam::{Mat4, Quat, Vec3};
use isocloth::ColliderShape;
use isocloth_bevy::character::{Character, CharacterError};

mod common;
use common::gltf::{Bin, f32s, glb};
use common::plugin_app;

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
    /// Three more meshes: `CapeWeights` and `CapePainted` (7 x 7 grids 0.6 m square behind the
    /// cylinder at z = -0.2, top row at y = 1, on the cylinder's skin), the first weighted to
    /// the elbow on its top row only, the second weighted to the elbow everywhere with its top
    /// row painted red (`COLOR_0`) and a max distance painted 0 on the top row and 2 cm more each
    /// row down (`_MAX_DISTANCE`); and `Flag`, a grid with no skin.
    capes: bool,
    /// With `capes`: vertex 10 of `CapePainted` paints a max distance of -1 m.
    bad_distance: bool,
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
    // The capes: (node JSON without the mesh index, mesh JSON).
    let mut capes: Vec<(String, String)> = Vec::new();
    if f.capes {
        let grid = |bin: &mut Bin, painted: bool, skinned: bool| {
            let (mut pos, mut joints, mut weights, mut colors, mut idx) =
                (vec![], vec![], vec![], vec![], vec![]);
            for r in 0..7u32 {
                for c in 0..7u32 {
                    pos.extend([-0.3 + 0.1 * c as f32, 1.0 - 0.1 * r as f32, -0.2]);
                    joints.extend([1u16, 0, 0, 0]);
                    let w = if painted || r == 0 { 1.0f32 } else { 0.0 };
                    weights.extend([w, 0.0, 0.0, 0.0]);
                    let red = if r == 0 { 1.0f32 } else { 0.0 };
                    colors.extend([red, 0.5, 0.5, 1.0]);
                }
            }
            for r in 0..6u32 {
                for c in 0..6u32 {
                    let a = r * 7 + c;
                    idx.extend([a, a + 7, a + 1, a + 1, a + 7, a + 8]);
                }
            }
            let p = bin.push(
                f32s(&pos),
                r#""componentType":5126,"count":49,"type":"VEC3","min":[-0.3,0.4,-0.2],"max":[0.3,1.0,-0.2]"#.to_string(),
            );
            let i = bin.push(
                idx.iter().flat_map(|x| x.to_le_bytes()).collect(),
                r#""componentType":5125,"count":216,"type":"SCALAR""#.to_string(),
            );
            let mut attributes = format!(r#""POSITION":{p}"#);
            if skinned {
                let j = bin.push(
                    joints.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    r#""componentType":5123,"count":49,"type":"VEC4""#.to_string(),
                );
                let w = bin.push(
                    f32s(&weights),
                    r#""componentType":5126,"count":49,"type":"VEC4""#.to_string(),
                );
                attributes += &format!(r#","JOINTS_0":{j},"WEIGHTS_0":{w}"#);
            }
            if painted {
                let c = bin.push(
                    f32s(&colors),
                    r#""componentType":5126,"count":49,"type":"VEC4""#.to_string(),
                );
                attributes += &format!(r#","COLOR_0":{c}"#);
                // Max distance painted 0 on the top row, 2 cm more each row down.
                let mut d: Vec<f32> = (0..49).map(|v| 0.02 * (v / 7) as f32).collect();
                if f.bad_distance {
                    d[10] = -1.0;
                }
                let d = bin.push(
                    f32s(&d),
                    r#""componentType":5126,"count":49,"type":"SCALAR""#.to_string(),
                );
                attributes += &format!(r#","_MAX_DISTANCE":{d}"#);
            }
            format!(r#"{{"primitives":[{{"attributes":{{{attributes}}},"indices":{i}}}]}}"#)
        };
        capes.push((
            r#""name":"CapeWeights","skin":0"#.into(),
            grid(&mut bin, false, true),
        ));
        capes.push((
            r#""name":"CapePainted","skin":0"#.into(),
            grid(&mut bin, true, true),
        ));
        capes.push((r#""name":"Flag""#.into(), grid(&mut bin, false, false)));
    }
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
    let mut mesh_nodes: Vec<String> = (0..parts.len())
        .map(|k| {
            let skin = if f.no_skin {
                String::new()
            } else {
                format!(r#","skin":{k}"#)
            };
            format!(r#"{{"mesh":{k}{skin}}}"#)
        })
        .collect();
    for (k, (node, _)) in capes.iter().enumerate() {
        mesh_nodes.push(format!(r#"{{"mesh":{},{node}}}"#, parts.len() + k));
    }
    let scene_nodes: Vec<String> = std::iter::once(0)
        .chain(2..2 + mesh_nodes.len())
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
            .chain(capes.iter().map(|c| c.1.as_str()))
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
    glb(&json, &bin)
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
    assert!(matches!(
        c.cape_joints(),
        Err(CharacterError::NoUpperSpine { .. })
    ));
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

/// A mesh named as cloth is read apart from the body, with its own skin: the cylinder keeps its
/// 132 vertices, the cape has its 49 with the elbow (joint 1) as slot 1 and the top row's
/// weights; a name the file does not have and a mesh without a skin are typed errors naming
/// the mesh.
#[test]
fn a_cloth_mesh_in_the_file_is_read_apart_from_the_body() {
    let glb = cylinder_glb(Faults {
        capes: true,
        ..Faults::default()
    });
    let c = Character::from_glb_with_cloth(&glb, Some("capeweights")).unwrap();
    assert_eq!(c.vertex_count(), 132 + 49);
    let cape = &c.cloths()[0];
    assert_eq!(cape.name, "CapeWeights");
    assert_eq!(cape.positions.len(), 49);
    assert_eq!(cape.joints, vec![0, 1]);
    assert_eq!(cape.joint_weights[3], [1.0, 0.0, 0.0, 0.0]);
    assert_eq!(cape.joint_weights[10], [0.0; 4]);
    assert!(cape.colors.is_none());
    let painted = Character::from_glb_with_cloth(&glb, Some("CapePainted")).unwrap();
    assert_eq!(painted.cloths()[0].colors.as_ref().unwrap()[0][0], 1.0);
    match Character::from_glb_with_cloth(&glb, Some("Flag")) {
        Err(CharacterError::ClothNotSkinned { mesh }) => assert_eq!(mesh, "Flag"),
        other => panic!("{other:?}"),
    }
    match Character::from_glb_with_cloth(&glb, Some("Skirt")) {
        Err(CharacterError::NoSuchMesh { name, available }) => {
            assert_eq!(name, "Skirt");
            assert!(
                available.contains(&"CapePainted".to_string()),
                "{available:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// The cape of `name` in the cylinder's file, spawned as Bevy's glTF loader spawns a skinned
/// mesh ([`isocloth_bevy::spawn_skinned_cloth`]) beside the playing character, run for 40
/// updates; the cape's entity and the app.
fn skinned_cape(
    name: &str,
    rule: isocloth_bevy::PinsFromSkin,
) -> (bevy_app::App, bevy_ecs::entity::Entity) {
    skinned_cape_with(name, rule, |_| {}, 40)
}

/// [`skinned_cape`] with the cape's part changed by `edit` before it is spawned, run for
/// `updates` updates.
fn skinned_cape_with(
    name: &str,
    rule: isocloth_bevy::PinsFromSkin,
    edit: impl FnOnce(&mut isocloth_bevy::character::SkinnedPart),
    updates: usize,
) -> (bevy_app::App, bevy_ecs::entity::Entity) {
    let glb = cylinder_glb(Faults {
        capes: true,
        ..Faults::default()
    });
    let c = Character::from_glb_with_cloth(&glb, Some(name)).unwrap();
    let clip = c.clip(Some("Bend")).unwrap();
    let mut cloth = c.cloths()[0].clone();
    edit(&mut cloth);
    let mut app = plugin_app();
    let world = app.world_mut();
    let player = isocloth_bevy::spawn_character(world, std::sync::Arc::new(c), clip);
    let joints = world
        .get::<isocloth_bevy::CharacterPlayer>(player)
        .unwrap()
        .joints
        .clone();
    let cape = isocloth_bevy::spawn_skinned_cloth(
        world,
        &cloth,
        &joints,
        isocloth::Material::default(),
        rule,
    );
    for _ in 0..updates {
        app.update();
    }
    (app, cape)
}

/// Pins from the mesh's own skin, on the shape Bevy's glTF loader gives a skinned cape (a
/// `SkinnedMesh` naming the joint entities, `JOINT_INDEX`/`JOINT_WEIGHT` on the mesh): with
/// the weight rule on the cape weighted only on its top row, and with the painted rule on the
/// cape weighted everywhere and painted red on its top row, the cloth pins exactly the top
/// row (its 7 vertices and the 6 red nodes between them); after 40 ticks of the clip that
/// turns the elbow, each pinned vertex sits where the skin puts it (the elbow's transform
/// times its inverse bind pose, within 1e-4 m); the `SkinnedMesh` is gone (the mesh draws the
/// simulation).
#[test]
fn a_skinned_cape_takes_its_pins_from_its_weights_or_its_paint() {
    use isocloth_bevy::{ClothBones, ClothSim, PinsFromSkin};
    for (name, rule) in [
        ("CapeWeights", PinsFromSkin::Weights { threshold: 0.5 }),
        ("CapePainted", PinsFromSkin::Painted { channel: 0 }),
    ] {
        let (app, cape) = skinned_cape(name, rule);
        let world = app.world();
        let sim = world.get::<ClothSim>(cape).unwrap_or_else(|| {
            panic!(
                "{name}: {:?}",
                world.get::<isocloth_bevy::ClothBuildError>(cape)
            )
        });
        assert_eq!(sim.cloth.pins().len(), 13, "{name}");
        assert!(
            world
                .get::<bevy_mesh::skinning::SkinnedMesh>(cape)
                .is_none()
        );
        let bones = world.get::<ClothBones>(cape).unwrap();
        let elbow = world
            .get::<bevy_transform::components::GlobalTransform>(bones.bones[0])
            .unwrap()
            .to_matrix();
        let skin = elbow * Mat4::from_translation(Vec3::new(0.0, -0.5, 0.0));
        for v in 0..7 {
            let bind = Vec3::new(-0.3 + 0.1 * v as f32, 1.0, -0.2);
            let want = skin.transform_point3(bind);
            let got = sim.cloth.positions()[v].as_vec3();
            assert!(
                got.distance(want) < 1e-4,
                "{name} vertex {v}: {got} vs {want}"
            );
        }
        // The elbow has turned: the top row is not where it was bound.
        assert!(
            sim.cloth.positions()[0]
                .as_vec3()
                .distance(Vec3::new(-0.3, 1.0, -0.2))
                > 0.05
        );
    }
}

/// Pins from the skin refused with typed errors: the painted rule on a mesh with no colours,
/// a colour channel past alpha, the weight rule on a mesh weighted everywhere (it would pin
/// every vertex), and the rule on an entity without a `SkinnedMesh`.
#[test]
fn pins_from_the_skin_refuse_what_is_missing_or_out_of_range() {
    use isocloth_bevy::{BevyClothError, ClothBuildError, PinsFromSkin};
    let (app, cape) = skinned_cape("CapeWeights", PinsFromSkin::Painted { channel: 0 });
    match &app.world().get::<ClothBuildError>(cape).unwrap().0 {
        BevyClothError::BadAttribute { attribute, reason } => {
            assert_eq!(*attribute, "Vertex_Color");
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!("{other}"),
    }
    let (app, cape) = skinned_cape("CapePainted", PinsFromSkin::Painted { channel: 7 });
    assert!(matches!(
        app.world().get::<ClothBuildError>(cape).unwrap().0,
        BevyClothError::BadAttribute {
            attribute: "Vertex_Color",
            ..
        }
    ));
    let (app, cape) = skinned_cape("CapePainted", PinsFromSkin::Weights { threshold: 0.5 });
    assert!(matches!(
        app.world().get::<ClothBuildError>(cape).unwrap().0,
        BevyClothError::AllPinned(_)
    ));
    let (mut app, cape) = skinned_cape("CapeWeights", PinsFromSkin::default());
    let world = app.world_mut();
    let mesh = world.get::<bevy_mesh::Mesh3d>(cape).unwrap().clone();
    let plain = world
        .spawn((
            mesh,
            bevy_transform::components::Transform::default(),
            isocloth_bevy::SimulatedCloth::default(),
            PinsFromSkin::default(),
        ))
        .id();
    app.update();
    assert!(matches!(
        app.world().get::<ClothBuildError>(plain).unwrap().0,
        BevyClothError::NotSkinned(_)
    ));
}

/// A painted max distance (`_MAX_DISTANCE` in the file, 0 on the top row and 2 cm more each
/// row down) reaches the cloth: the file's values are read, the cape gets its own config
/// whose limits hold one value per cloth node (a red node the mean of its edge's ends), and
/// after 40 ticks of the elbow turning every vertex is within its painted distance (plus
/// 1 mm) of where the skin carries it. On the cape whose lower rows are unweighted, the same
/// paint is refused, naming the joint weights: nothing to measure it from.
#[test]
fn a_painted_max_distance_holds_the_cape_near_its_skin() {
    use isocloth_bevy::{
        BevyClothError, ClothBuildError, ClothConfigOverride, ClothSim, PinsFromSkin,
    };
    let glb = cylinder_glb(Faults {
        capes: true,
        ..Faults::default()
    });
    let c = Character::from_glb_with_cloth(&glb, Some("CapePainted")).unwrap();
    let painted = c.cloths()[0].max_distance.clone().unwrap();
    assert_eq!((painted[0], painted[48]), (0.0, 0.12));
    let (app, cape) = skinned_cape("CapePainted", PinsFromSkin::Painted { channel: 0 });
    let world = app.world();
    let sim = world.get::<ClothSim>(cape).unwrap();
    let limits = &world.get::<ClothConfigOverride>(cape).unwrap().0.limits;
    assert_eq!(limits.max_distance.len(), sim.cloth.positions().len());
    assert!((limits.max_distance[7] - 0.02).abs() < 1e-6);
    let bones = world.get::<isocloth_bevy::ClothBones>(cape).unwrap();
    let elbow = world
        .get::<bevy_transform::components::GlobalTransform>(bones.bones[0])
        .unwrap()
        .to_matrix();
    let skin = elbow * Mat4::from_translation(Vec3::new(0.0, -0.5, 0.0));
    for (v, &limit) in painted.iter().enumerate() {
        let bind = Vec3::new(
            -0.3 + 0.1 * (v % 7) as f32,
            1.0 - 0.1 * (v / 7) as f32,
            -0.2,
        );
        let d = sim.cloth.positions()[v]
            .as_vec3()
            .distance(skin.transform_point3(bind));
        assert!(
            d <= limit + 1e-3,
            "vertex {v}: {d} m from its skin, painted {}",
            limit
        );
    }

    let (app, cape) = skinned_cape_with(
        "CapeWeights",
        PinsFromSkin::Weights { threshold: 0.5 },
        |part| part.max_distance = Some(vec![0.05; 49]),
        2,
    );
    match &app.world().get::<ClothBuildError>(cape).unwrap().0 {
        BevyClothError::BadAttribute { attribute, .. } => {
            assert_eq!(*attribute, "Vertex_JointWeight")
        }
        other => panic!("{other}"),
    }
}

/// A painted max distance out of range is refused when the file is read, naming the mesh, the
/// attribute and the vertex.
#[test]
fn a_negative_painted_max_distance_is_refused() {
    let glb = cylinder_glb(Faults {
        capes: true,
        bad_distance: true,
        ..Faults::default()
    });
    match Character::from_glb_with_cloth(&glb, Some("CapePainted")) {
        Err(CharacterError::BadAttribute {
            mesh,
            attribute,
            reason,
        }) => {
            assert_eq!((mesh.as_str(), attribute), ("CapePainted", "_MAX_DISTANCE"));
            assert!(reason.contains("vertex 10"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
