//! The glTF character: loading, clips, skinning, the capsule fit and the cape's joints, on a
//! small skinned cylinder written here and on the shipped `assets/CesiumMan.glb`; bad files end
//! in typed errors.

use glam::{Mat4, Quat, Vec3};
use isocloth::ColliderShape;
use isocloth_bevy::character::{Character, CharacterError};

/// What to break in [`cylinder_glb`].
#[derive(Default, Clone, Copy)]
struct Faults {
    no_skin: bool,
    nan_keyframe: bool,
}

/// A binary glTF: a 1 m cylinder of radius 0.1 m along +Y (11 rings of 12 vertices), skinned to
/// two joints (`root` at the origin owns the lower half, `elbow` at 0.5 m the upper), and a
/// clip `Bend` turning `elbow` 90 degrees about Z over 1 s.
fn cylinder_glb(f: Faults) -> Vec<u8> {
    let (rings, around) = (11u32, 12u32);
    let mut bin: Vec<u8> = Vec::new();
    let mut views = Vec::new();
    let mut push = |bytes: Vec<u8>, bin: &mut Vec<u8>| {
        while !bin.len().is_multiple_of(4) {
            bin.push(0);
        }
        views.push((bin.len(), bytes.len()));
        bin.extend(bytes);
        views.len() - 1
    };
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut pos = Vec::new();
    let mut joints = Vec::new();
    let mut weights = Vec::new();
    for r in 0..rings {
        let y = r as f32 / (rings - 1) as f32;
        for k in 0..around {
            let a = k as f32 / around as f32 * std::f32::consts::TAU;
            pos.extend([0.1 * a.cos(), y, 0.1 * a.sin()]);
            joints.extend(if y < 0.5 {
                [0u16, 0, 0, 0]
            } else {
                [1, 0, 0, 0]
            });
            weights.extend([1.0f32, 0.0, 0.0, 0.0]);
        }
    }
    let mut idx = Vec::new();
    for r in 0..rings - 1 {
        for k in 0..around {
            let (a, b) = (r * around + k, r * around + (k + 1) % around);
            idx.extend([a, a + around, b, b, a + around, b + around]);
        }
    }
    let n = (rings * around) as usize;
    let v_pos = push(f32s(&pos), &mut bin);
    let v_joint = push(
        joints.iter().flat_map(|x| x.to_le_bytes()).collect(),
        &mut bin,
    );
    let v_weight = push(f32s(&weights), &mut bin);
    let v_idx = push(idx.iter().flat_map(|x| x.to_le_bytes()).collect(), &mut bin);
    let ibm = [
        Mat4::IDENTITY,
        Mat4::from_translation(Vec3::new(0.0, -0.5, 0.0)),
    ];
    let v_ibm = push(
        f32s(
            &ibm.iter()
                .flat_map(|m| m.to_cols_array())
                .collect::<Vec<_>>(),
        ),
        &mut bin,
    );
    let v_times = push(f32s(&[0.0, 1.0]), &mut bin);
    let q = Quat::from_rotation_z(std::f32::consts::FRAC_PI_2);
    let v_rot = push(f32s(&[0.0, 0.0, 0.0, 1.0, q.x, q.y, q.z, q.w]), &mut bin);
    let bad = if f.nan_keyframe { f32::NAN } else { 0.5 };
    let v_tr = push(f32s(&[0.0, 0.5, 0.0, 0.0, bad, 0.0]), &mut bin);
    while !bin.len().is_multiple_of(4) {
        bin.push(0);
    }
    let (lo, hi) = ([-0.1f32, 0.0, -0.1], [0.1f32, 1.0, 0.1]);
    let views_json: Vec<String> = views
        .iter()
        .map(|(o, l)| format!(r#"{{"buffer":0,"byteOffset":{o},"byteLength":{l}}}"#))
        .collect();
    let skin = if f.no_skin { "" } else { r#","skin":0"# };
    let json = format!(
        r#"{{"asset":{{"version":"2.0"}},"scene":0,"scenes":[{{"nodes":[0,2]}}],
"nodes":[{{"name":"root","children":[1]}},{{"name":"elbow","translation":[0,0.5,0]}},{{"mesh":0{skin}}}],
"meshes":[{{"primitives":[{{"attributes":{{"POSITION":0,"JOINTS_0":1,"WEIGHTS_0":2}},"indices":3}}]}}],
"skins":[{{"joints":[0,1],"inverseBindMatrices":4}}],
"animations":[{{"name":"Bend","channels":[{{"sampler":0,"target":{{"node":1,"path":"rotation"}}}},{{"sampler":1,"target":{{"node":1,"path":"translation"}}}}],
"samplers":[{{"input":5,"output":6}},{{"input":5,"output":7}}]}}],
"accessors":[
{{"bufferView":{v_pos},"componentType":5126,"count":{n},"type":"VEC3","min":{lo:?},"max":{hi:?}}},
{{"bufferView":{v_joint},"componentType":5123,"count":{n},"type":"VEC4"}},
{{"bufferView":{v_weight},"componentType":5126,"count":{n},"type":"VEC4"}},
{{"bufferView":{v_idx},"componentType":5125,"count":{ni},"type":"SCALAR"}},
{{"bufferView":{v_ibm},"componentType":5126,"count":2,"type":"MAT4"}},
{{"bufferView":{v_times},"componentType":5126,"count":2,"type":"SCALAR","min":[0],"max":[1]}},
{{"bufferView":{v_rot},"componentType":5126,"count":2,"type":"VEC4"}},
{{"bufferView":{v_tr},"componentType":5126,"count":2,"type":"VEC3"}}],
"bufferViews":[{views}],"buffers":[{{"byteLength":{bl}}}]}}"#,
        ni = idx.len(),
        views = views_json.join(","),
        bl = bin.len(),
    );
    let mut json = json.into_bytes();
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

/// A missing clip names the clips there are; a mesh without a skin, a NaN keyframe and a
/// truncated file each give their typed error.
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
