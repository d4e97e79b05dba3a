//! A skinned glTF character walks with a cape, through the Bevy plugin (about 8 s).
//!
//! ```sh
//! cargo run --release --example gltf_cape -- assets/CesiumMan.glb [--clip NAME]
//!     [--preset mobile|console|desktop] [--seconds S] [--tapered] [--cape-from-asset NAME]
//!     [--skinned-pins] [--spine JOINT]
//! ```
//!
//! The generated cape's pinned row moves as one rigid piece (`AttachmentSettings::rigid_pins`
//! through `ClothPinSettings`): its vertices hang from the upper spine and both shoulders, whose
//! motions differ; `--skinned-pins` skins each pin instead (the row then stretches with the
//! shoulders, reported as `pinned_max_strain`).
//!
//! With `--cape-from-asset NAME` the cape is the file's own skinned mesh named `NAME` (not a
//! generated one): it is read apart from the body, spawned as Bevy's glTF loader spawns a
//! skinned mesh (`isocloth_bevy::spawn_skinned_cloth`) and pinned from its skin
//! (`PinsFromSkin`): by the paint of its `COLOR_0` red channel if the mesh has colours (1
//! pinned, 0 free), else every vertex whose joint weights sum to at least 0.5.
//!
//! The character is a `.glb` or a `.gltf` (buffers beside it or embedded); every skinned mesh
//! of the file is read, so a body split into parts gets capsules on every part. The character's
//! clip plays at 60 Hz on one bone entity per skin joint (their
//! `GlobalTransform`s set from the clip each fixed tick, before the cloth systems). Collision
//! capsules are fitted to the joints from the skin weights
//! ([`Character::fit_capsules`](isocloth_bevy::character::Character::fit_capsules), or with
//! `--tapered` two-radius capsules,
//! [`Character::fit_tapered_capsules`](isocloth_bevy::character::Character::fit_tapered_capsules));
//! a cape
//! hangs from the upper spine and the shoulders, found from the skeleton's shape
//! ([`Character::cape_joints`](isocloth_bevy::character::Character::cape_joints)), or from the
//! joint `--spine JOINT` names; it is laid out at the clip's first frame, centred on the skin of
//! the back. The ground is a plane at the lowest point the skin reaches over the clip (a rig
//! whose origin is at its hips stands on it too). Writes a contact sheet of skinned body and cape (`target/isocloth/gltf_cape.png`)
//! and an animated PNG of the run (`target/isocloth/gltf_cape.apng`, 10 frames a second),
//! prints a table, then one JSON line: `max_strain`, `mean_strain`, `max_penetration_m`,
//! `nodes_inside_body`, `step_ms_median`, `tapered`.

#[path = "../../../examples/common/render.rs"]
#[allow(dead_code)]
mod render;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bevy_app::prelude::*;
use bevy_ecs::prelude::*;
use bevy_time::TimeUpdateStrategy;
use bevy_transform::prelude::*;
use glam::{DVec3, Vec3};
use isocloth::ecs::{BudgetPreset, ClothColliders, ClothConfig};
use isocloth::{AttachmentSettings, ColliderShape, Material, Pose};
use isocloth_bevy::character::{Character, pose_of_matrix};
use isocloth_bevy::{
    CharacterPlayer, ClothCollider, ClothSim, HeadlessPlugins, IsoclothPlugin, PinsFromSkin,
    spawn_character, spawn_skinned_cloth,
};
use render::{Camera, Grid, Style};
use tiny_skia::Pixmap;

const HZ: f64 = 60.0;
/// Tiles in the contact sheet.
const TILES: usize = 4;
/// Picture size (contact-sheet tiles and animation frames).
const W: u32 = 320;
const H: u32 = 360;
/// Each shoulder's share of every pinned vertex (the upper spine has the rest; see
/// `Character::cape`).
const SHOULDER_WEIGHT: f32 = 0.15;
/// Animation frames per second.
const APNG_FPS: usize = 10;

struct Args {
    file: String,
    clip: Option<String>,
    preset: (String, BudgetPreset),
    seconds: f64,
    tapered: bool,
    cape_from_asset: Option<String>,
    skinned_pins: bool,
    spine: Option<String>,
}

fn args() -> Result<Args, String> {
    let mut file = None;
    let mut clip = None;
    let mut preset = ("console".to_string(), BudgetPreset::console());
    let mut seconds = 10.0;
    let mut tapered = false;
    let mut cape_from_asset = None;
    let mut skinned_pins = false;
    let mut spine = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--clip" => clip = Some(it.next().ok_or("--clip takes a clip name")?),
            "--preset" => {
                let name = it.next().unwrap_or_default();
                let p = match name.as_str() {
                    "mobile" => BudgetPreset::mobile(),
                    "console" => BudgetPreset::console(),
                    "desktop" => BudgetPreset::desktop(),
                    _ => {
                        return Err(format!(
                            "--preset takes mobile, console or desktop, got {name:?}"
                        ));
                    }
                };
                preset = (name, p);
            }
            "--tapered" => tapered = true,
            "--skinned-pins" => skinned_pins = true,
            "--spine" => spine = Some(it.next().ok_or("--spine takes a joint name")?),
            "--cape-from-asset" => {
                cape_from_asset = Some(it.next().ok_or("--cape-from-asset takes a mesh name")?)
            }
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|s| s.parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or("--seconds takes a positive number")?;
            }
            other if other.starts_with("--") => {
                return Err(format!(
                    "unknown option {other:?} (FILE.glb [--clip NAME] [--preset NAME] [--seconds S] [--tapered] [--cape-from-asset NAME] [--skinned-pins] [--spine JOINT])"
                ));
            }
            other => file = Some(other.to_string()),
        }
    }
    Ok(Args {
        file: file.ok_or(
            "usage: gltf_cape FILE.glb|FILE.gltf [--clip NAME] [--preset NAME] [--seconds S] [--tapered] [--cape-from-asset NAME] [--skinned-pins] [--spine JOINT]",
        )?,
        clip,
        preset,
        seconds,
        tapered,
        cape_from_asset,
        skinned_pins,
        spine,
    })
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    let character = Character::from_file_with_cloth(&args.file, args.cape_from_asset.as_deref())
        .map_err(|e| format!("{}: {e}", args.file))?;
    let clip = character.clip(args.clip.as_deref())?;
    let cape_joints = match &args.spine {
        Some(name) => character.cape_joints_from(name)?,
        None => character.cape_joints()?,
    };
    let capsules = if args.tapered {
        character.fit_tapered_capsules(30, 0.9)
    } else {
        character.fit_capsules(30, 0.9)
    };

    let layout = character.cape_on(&cape_joints, Some(clip), 0.0, 10, 14, SHOULDER_WEIGHT);
    let ground = character.lowest_point(Some(clip));
    let forward = layout.forward;
    let side = Vec3::Y.cross(forward).normalize();

    let mut app = App::new();
    let config = ClothConfig {
        budget: args.preset.1.clone(),
        timestep: 1.0 / HZ,
        ..Default::default()
    };
    let thickness = config.contact.thickness;
    app.insert_resource(config)
        .add_plugins((HeadlessPlugins, IsoclothPlugin::default()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_secs_f64(
            1.0 / HZ,
        )));
    let world = app.world_mut();
    let player = spawn_character(world, Arc::new(character.clone()), clip);
    let joints = world
        .get::<CharacterPlayer>(player)
        .expect("spawned")
        .joints
        .clone();
    world.spawn((
        Transform::from_xyz(0.0, ground, 0.0),
        ClothCollider::new(ColliderShape::Plane),
    ));
    let cape = if let Some(own) = character.cloths().first() {
        let rule = if own.colors.is_some() {
            PinsFromSkin::Painted { channel: 0 }
        } else {
            PinsFromSkin::Weights { threshold: 0.5 }
        };
        spawn_skinned_cloth(world, own, &joints, Material::default(), rule)
    } else {
        // The collar moves as one piece: its bones blend differently along it.
        layout.spawn(
            world,
            &joints,
            Material::default(),
            AttachmentSettings {
                rigid_pins: !args.skinned_pins,
                ..AttachmentSettings::default()
            },
        )
    };
    // Run: the first update advances no time; then one fixed tick per update.
    app.update();
    let frames = (args.seconds * HZ).round() as usize;
    let snap_every = (HZ as usize / APNG_FPS).max(1);
    let (mut max_strain, mut mean_strain, mut max_pen) = (0.0f64, 0.0f64, 0.0f64);
    let mut inside_max = 0usize;
    let mut pinned_max_strain = 0.0f64;
    let mut times = Vec::with_capacity(frames);
    let mut tiles = Vec::new();
    let mut apng_frames: Vec<Vec<u8>> = Vec::new();
    let mut joint_now = Vec::new();
    let mut body = Vec::new();
    for frame in 0..frames {
        let t0 = Instant::now();
        app.update();
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        let world = app.world();
        let Some(sim) = world.get::<ClothSim>(cape) else {
            let err = world
                .get::<isocloth_bevy::ClothBuildError>(cape)
                .map(|e| e.0.to_string())
                .unwrap_or_else(|| "not built".into());
            return Err(format!("the cape was not built: {err}").into());
        };
        if let Some(e) = &sim.last_error {
            return Err(format!("frame {frame}: {e}").into());
        }
        let m = sim.cloth.measures();
        max_strain = max_strain.max(m.max_strain);
        mean_strain = mean_strain.max(m.mean_strain);
        pinned_max_strain = pinned_max_strain.max(m.pinned_max_strain);
        let set = &world.resource::<ClothColliders>().set;
        let x = sim.cloth.positions();
        max_pen = max_pen.max(set.max_penetration(x, thickness));
        let inside = set.count_inside(x);
        inside_max = inside_max.max(inside);

        let tile = (frame + 1) % (frames / TILES).max(1) == 0;
        if frame % snap_every == 0 || tile {
            let played = world.get::<CharacterPlayer>(player).expect("spawned").ticks;
            character.joint_transforms(Some(clip), (played - 1) as f32 / HZ as f32, &mut joint_now);
            character.skin(&joint_now, &mut body);
            let centre = pose_of_matrix(&joint_now[cape_joints.spine]).translation;
            let f = forward.as_dvec3();
            let s = side.as_dvec3();
            let cam = Camera::look_at(
                centre + DVec3::new(0.0, 0.25, 0.0) - 2.4 * f + 1.3 * s,
                centre - DVec3::new(0.0, 0.3, 0.0),
                0.75,
                W,
                H,
            );
            let positions: Vec<Vec3> = x.iter().map(|p| p.as_vec3()).collect();
            let style = Style {
                ground: Some(Grid {
                    height: f64::from(ground),
                    center: centre,
                    spacing: 0.25,
                    lines: 8,
                }),
                body_outlines: false,
                far_body_depth: false,
            };
            let no_bodies: [(ColliderShape, Pose); 0] = [];
            let pix = render::render_with_skin(
                &cam,
                &positions,
                &sim.cloth.render_indices(),
                Some((&body, character.indices())),
                &no_bodies,
                &style,
                W,
                H,
            );
            if frame % snap_every == 0 {
                apng_frames.push(pix.data().to_vec());
            }
            if tile && tiles.len() < TILES {
                tiles.push(pix);
            }
        }
    }

    let out_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/isocloth");
    std::fs::create_dir_all(&out_dir)?;
    let out_dir = out_dir.canonicalize()?;
    let sheet_path = out_dir.join("gltf_cape.png");
    let mut sheet = Pixmap::new(W * TILES as u32, H).expect("nonzero size");
    for (k, t) in tiles.iter().enumerate() {
        sheet.draw_pixmap(
            (k as u32 * W) as i32,
            0,
            t.as_ref(),
            &tiny_skia::PixmapPaint::default(),
            tiny_skia::Transform::identity(),
            None,
        );
    }
    sheet.save_png(&sheet_path)?;
    let apng_path = out_dir.join("gltf_cape.apng");
    write_apng(&apng_path, &apng_frames)?;

    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let sim = app.world().get::<ClothSim>(cape).expect("built");
    println!(
        "gltf_cape: {} ({} joints, clip {:?} {:.2} s), {} capsules fitted, cape {} nodes, preset {}",
        args.file,
        character.joint_names().len(),
        character.clips()[clip].name,
        character.clips()[clip].duration,
        capsules.len(),
        sim.cloth.positions().len(),
        args.preset.0
    );
    println!("{:<22} {:>12}", "figure", "value");
    println!("{:<22} {:>12}", "frames", frames);
    println!("{:<22} {:>11.2}%", "max strain", 100.0 * max_strain);
    println!("{:<22} {:>11.2}%", "mean strain", 100.0 * mean_strain);
    println!(
        "{:<22} {:>11.2}%",
        "pinned max strain",
        100.0 * pinned_max_strain
    );
    println!("{:<22} {:>10.2}mm", "max penetration", 1e3 * max_pen);
    println!("{:<22} {:>12}", "nodes inside a body", inside_max);
    println!("{:<22} {:>10.3}ms", "tick median", median);
    println!("contact sheet: {}", sheet_path.display());
    println!("animation: {}", apng_path.display());
    println!(
        "{{\"file\":{:?},\"clip\":{:?},\"preset\":{:?},\"frames\":{},\"capsules\":{},\"cape_nodes\":{},\"max_strain\":{:.6},\"mean_strain\":{:.6},\"pinned_max_strain\":{:.6},\"max_penetration_m\":{:.6},\"nodes_inside_body\":{},\"step_ms_median\":{:.4},\"tapered\":{},\"cape_from_asset\":{},\"contact_sheet\":{:?},\"animation\":{:?}}}",
        args.file,
        character.clips()[clip].name,
        args.preset.0,
        frames,
        capsules.len(),
        sim.cloth.positions().len(),
        max_strain,
        mean_strain,
        pinned_max_strain,
        max_pen,
        inside_max,
        median,
        args.tapered,
        args.cape_from_asset
            .as_ref()
            .map_or("null".to_string(), |n| format!("{n:?}")),
        sheet_path.display().to_string(),
        apng_path.display().to_string()
    );
    Ok(())
}

/// Writes `frames` (premultiplied RGBA, `W` x `H`) as an animated PNG at `APNG_FPS`, looping.
fn write_apng(
    path: &std::path::Path,
    frames: &[Vec<u8>],
) -> Result<(), Box<dyn std::error::Error>> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut enc = png::Encoder::new(file, W, H);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_animated(frames.len() as u32, 0)?;
    enc.set_frame_delay(1, APNG_FPS as u16)?;
    let mut writer = enc.write_header()?;
    for f in frames {
        writer.write_image_data(f)?;
    }
    writer.finish()?;
    Ok(())
}
