//! Layers: a character with a skirt and a cape over it walks, runs, stops and sits down (10 s), with cloth-against-cloth contact on and off (about 20 s).
//!
//! Layers (`isocloth::layers`, `isocloth::layering`): the procedural character of
//! `isocloth::rig` plays `Animation::Sit` (walk 2 s, run 2 s, stop, sit down on a seat from
//! 5 s, seated to 10 s) wearing a flared skirt pinned at the waist (rigid pins on the pelvis)
//! and a cape pinned at the shoulders that hangs over the skirt's back. The skirt is the inner
//! layer (stepped first), the cape the outer. Four runs of the same clip at 60 Hz:
//!
//! - **layers**: skirt and cape meet (`ClothLayers`, thickness 5 mm);
//! - **off**: both cloths, layers off (they pass through each other);
//! - **skirt alone** and **cape alone**: each cloth without the other.
//!
//! Crossings are counted after every frame, the same way in every run, by an exact
//! triangle-triangle test between the two cloths' render meshes (`layers::layer_crossings`):
//! `crossings` sums them over the clip (`crossing_frames` counts frames with any).
//! `min_separation_m` is the least distance between the cloths' features within 5 cm, over the
//! clip. Strain: render-mesh strain without edges pinned at both ends (docs/design.md section 6).
//!
//! Writes a contact sheet `target/isocloth/layers_contact_sheet.png` (top row layers on,
//! bottom row off), prints a table, then one JSON line: per run `crossings`,
//! `crossing_frames`, `min_separation_m`, `skirt_max_strain`, `cape_max_strain`,
//! `max_strain`, `step_ms_median` (the two cloths' frame), and `strain_ratio` (each cloth's
//! max strain with layers over its value alone; the larger of the two).
//!
//! Run: `cargo run --release --example layers [-- --preset mobile|console|desktop]`
//! (default console).

#[path = "common/preset_arg.rs"]
mod preset_arg;
#[path = "common/render.rs"]
#[allow(dead_code)]
mod render;

use std::time::Instant;

use glam::{DQuat, DVec3, Vec3};
use isocloth::ecs::BudgetPreset;
use isocloth::layers::{layer_crossings, layer_separation};
use isocloth::rig::{Animation, BONES, CharacterRig, bone, demo_cape_attachments};
use isocloth::{
    AttachmentSettings, Attachments, BaseMesh, Cloth, ClothLayers, ClothMesh, ColliderId,
    ColliderSet, ColliderShape, Influence, LayerSettings, Material, Pose, SolverSettings,
    StepReport,
};
use render::{Camera, ClothDraw, Grid, Style};
use tiny_skia::Pixmap;

const DT: f64 = 1.0 / 60.0;
const FRAMES: usize = 600;
/// Frames of the contact sheet (one per column).
const SHOTS: [usize; 6] = [60, 150, 240, 300, 360, 599];
/// When the seat appears (s): the character has stopped.
const SEAT_AT: f64 = 4.85;

/// The skirt: a cone of cloth 0.4 m long from the waist (radius 0.2 m at 1.05 m) flaring to
/// 0.36 m at the hem, 24 x 6 base cells, its top ring pinned.
fn skirt(settings: SolverSettings) -> Result<Cloth, Box<dyn std::error::Error>> {
    let (around, along, length) = (24, 6, SKIRT_LENGTH);
    let base = BaseMesh::tube(1.0, length, around, along)?.map_positions(|p| {
        let y = SKIRT_TOP - length + p.y;
        let r = skirt_radius(y, 0.0);
        Vec3::new(p.x * r, y, p.z * r)
    });
    let ring: Vec<u32> = (0..around as u32)
        .map(|i| i + (along * around) as u32)
        .collect();
    pinned_cloth(&base, &ring, settings)
}

/// A cloth of `base` with the listed base vertices (and the edges between them) pinned.
fn pinned_cloth(
    base: &BaseMesh,
    vertices: &[u32],
    settings: SolverSettings,
) -> Result<Cloth, Box<dyn std::error::Error>> {
    let mesh = ClothMesh::new(base)?;
    let pins = mesh.nodes_for_vertices(vertices, true);
    Ok(Cloth::from_mesh(
        mesh,
        Material::default(),
        &pins,
        settings,
    )?)
}

/// The skirt's radius at height `y` (with `margin` added), as built.
fn skirt_radius(y: f32, margin: f32) -> f32 {
    let depth = ((SKIRT_TOP - y) / SKIRT_LENGTH).clamp(0.0, 1.0);
    0.2 + 0.16 * depth + margin
}

/// The skirt's length and the height of its waist (m).
const SKIRT_LENGTH: f32 = 0.4;
const SKIRT_TOP: f32 = 1.05;

/// The cape: the demo cape's size (0.5 x 0.9 m, 10 x 18 cells) hanging from the shoulders at
/// z = -0.19 m, its lower part wrapped 3 cm outside the skirt's back.
fn cape(settings: SolverSettings) -> Result<Cloth, Box<dyn std::error::Error>> {
    let (cx, cy) = (10, 18);
    let (width, length) = (0.5f32, 0.9f32);
    let base = BaseMesh::rectangle(width, length, cx, cy)?.map_positions(|p| {
        let (x, y) = (p.x - 0.5 * width, 1.46 - length + p.y);
        let r = skirt_radius(y, 0.03);
        let wrap = if y < 1.06 {
            (r * r - x * x).max(0.0).sqrt()
        } else {
            0.0
        };
        Vec3::new(x, y, -(0.19f32.max(wrap)))
    });
    let top: Vec<u32> = (0..=cx).map(|i| BaseMesh::grid_index(cx, i, cy)).collect();
    pinned_cloth(&base, &top, settings)
}

/// Which cloths a run steps.
#[derive(Clone, Copy, PartialEq)]
enum Run {
    Layers,
    Off,
    SkirtAlone,
    CapeAlone,
}

impl Run {
    fn name(self) -> &'static str {
        match self {
            Run::Layers => "layers",
            Run::Off => "off",
            Run::SkirtAlone => "skirt_alone",
            Run::CapeAlone => "cape_alone",
        }
    }
}

/// Figures of one run.
#[derive(Default)]
struct Figures {
    crossings: usize,
    crossing_frames: usize,
    min_separation_m: f64,
    skirt_max_strain: f64,
    cape_max_strain: f64,
    times_ms: Vec<f64>,
}

impl Figures {
    fn median_ms(&self) -> f64 {
        let mut t = self.times_ms.clone();
        t.sort_by(f64::total_cmp);
        t.get(t.len() / 2).copied().unwrap_or(0.0)
    }
}

/// One cloth of a snapshot: render positions, triangle indices, colour.
type DrawnCloth = (Vec<Vec3>, Vec<u32>, (f64, f64, f64));

struct Shot {
    cloths: Vec<DrawnCloth>,
    bodies: Vec<(ColliderShape, Pose)>,
    camera: Camera,
    ground: DVec3,
}

fn render_triangles(cloth: &Cloth) -> &[[u32; 3]] {
    cloth.model().mesh().render_triangles()
}

fn run(
    which: Run,
    settings: SolverSettings,
    shots: &mut Vec<Shot>,
) -> Result<Figures, Box<dyn std::error::Error>> {
    let mut rig = CharacterRig::new(Animation::Sit, DVec3::ZERO, 0.0);
    let mut poses = Vec::new();
    rig.poses(&mut poses);
    let mut colliders = ColliderSet::new();
    colliders.add(ColliderShape::Plane, Pose::IDENTITY)?;
    let mut bone_ids: Vec<(usize, ColliderId, Pose)> = Vec::new();
    for (b, pose) in poses.iter().enumerate().take(BONES.len()) {
        if let Some((shape, offset)) = CharacterRig::bone_collider(b) {
            let id = colliders.add(shape, pose.mul(&offset))?;
            bone_ids.push((b, id, offset));
        }
    }
    let (seat_shape, _) = rig.seat();
    let hidden = Pose::from_translation(DVec3::new(0.0, -5.0, 0.0));
    let seat = colliders.add(seat_shape.clone(), hidden)?;
    let mut seated = false;

    let skirt = skirt(settings)?;
    let pelvis = bone("pelvis").ok_or("no pelvis")? as u32;
    let ring: Vec<(u32, Vec<Influence>)> = skirt
        .pins()
        .iter()
        .map(|&n| {
            (
                n,
                vec![Influence {
                    bone: pelvis,
                    weight: 1.0,
                }],
            )
        })
        .collect();
    // The cape's inertia scales (`demo_cape_attachments`: linear 0.8, angular 0.6), so that
    // the part of the pelvis's motion both cloths are carried by rigidly before each step is
    // the same: a carry that differed would move one layer through the other outside the
    // step, where no contact sees it.
    let rigid = AttachmentSettings {
        rigid_pins: true,
        linear_inertia: 0.8,
        angular_inertia: 0.6,
        ..Default::default()
    };
    let mut skirt_att = Attachments::bind(&skirt, &ring, &poses, 0, rigid)?;
    let cape = cape(settings)?;
    let mut cape_att = demo_cape_attachments(&cape, &poses)?;
    let layers_on = which == Run::Layers;
    let mut cloths: Vec<Cloth> = match which {
        Run::Layers | Run::Off => vec![skirt, cape],
        Run::SkirtAlone => vec![skirt],
        Run::CapeAlone => vec![cape],
    };
    let has_skirt = which != Run::CapeAlone;
    let has_cape = which != Run::SkirtAlone;
    let mut layers = ClothLayers::new(LayerSettings::default(), cloths.len(), &[])?;
    if layers_on {
        layers = ClothLayers::new(LayerSettings::default(), 2, &[[0, 1]])?;
    }
    let mut reports: Vec<StepReport> = Vec::new();
    let mut fig = Figures {
        min_separation_m: f64::INFINITY,
        ..Default::default()
    };
    for frame in 0..FRAMES {
        rig.advance(DT);
        rig.poses(&mut poses);
        for &(b, id, offset) in &bone_ids {
            colliders.set_pose(id, poses[b].mul(&offset))?;
        }
        if !seated && rig.time() >= SEAT_AT {
            colliders.teleport(seat, rig.seat().1)?;
            seated = true;
        }
        let mut k = 0;
        if has_skirt {
            skirt_att.apply(&mut cloths[k], &poses)?;
            k += 1;
        }
        if has_cape {
            cape_att.apply(&mut cloths[k], &poses)?;
        }
        let start = Instant::now();
        if layers_on {
            layers.step(&mut cloths, DT, &colliders, &mut reports)?;
        } else {
            for c in cloths.iter_mut() {
                c.step_with(DT, &colliders)?;
            }
        }
        fig.times_ms.push(start.elapsed().as_secs_f64() * 1e3);
        colliders.finish_frame();
        let strain = |c: &Cloth| c.measures().max_strain;
        match which {
            Run::Layers | Run::Off => {
                let (a, b) = (&cloths[0], &cloths[1]);
                let pair = (
                    (render_triangles(a), a.positions()),
                    (render_triangles(b), b.positions()),
                );
                let crossed = layer_crossings(pair.0, pair.1);
                fig.crossings += crossed;
                fig.crossing_frames += (crossed > 0) as usize;
                fig.min_separation_m = fig
                    .min_separation_m
                    .min(layer_separation(pair.0, pair.1, 0.05));
                fig.skirt_max_strain = fig.skirt_max_strain.max(strain(a));
                fig.cape_max_strain = fig.cape_max_strain.max(strain(b));
            }
            Run::SkirtAlone => fig.skirt_max_strain = fig.skirt_max_strain.max(strain(&cloths[0])),
            Run::CapeAlone => fig.cape_max_strain = fig.cape_max_strain.max(strain(&cloths[0])),
        }
        if matches!(which, Run::Layers | Run::Off) && SHOTS.contains(&frame) {
            let target = rig.position + DVec3::new(0.0, 0.75, 0.0);
            let yaw = DQuat::from_rotation_y(rig.heading);
            let eye = target + yaw * DVec3::new(-1.3, 0.45, -1.6);
            let camera = Camera::look_at(eye, target, 0.8, 320, 240);
            let mut bodies: Vec<(ColliderShape, Pose)> = bone_ids
                .iter()
                .filter_map(|&(b, _, offset)| {
                    CharacterRig::bone_collider(b).map(|(s, _)| (s, poses[b].mul(&offset)))
                })
                .collect();
            if seated {
                bodies.push((seat_shape.clone(), rig.seat().1));
            }
            let colours = [(70.0, 120.0, 200.0), (190.0, 40.0, 45.0)];
            shots.push(Shot {
                cloths: cloths
                    .iter()
                    .zip(colours)
                    .map(|(c, tint)| {
                        (
                            c.positions().iter().map(|p| p.as_vec3()).collect(),
                            render_triangles(c).iter().flatten().copied().collect(),
                            tint,
                        )
                    })
                    .collect(),
                bodies,
                camera,
                ground: DVec3::new(rig.position.x, 0.0, rig.position.z),
            });
        }
    }
    Ok(fig)
}

fn contact_sheet(shots: &[Shot], path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let tiles: Vec<Pixmap> = shots
        .iter()
        .map(|s| {
            let style = Style {
                ground: Some(Grid {
                    height: 0.0,
                    center: s.ground,
                    spacing: 0.25,
                    lines: 8,
                }),
                body_outlines: true,
                far_body_depth: false,
            };
            let draws: Vec<ClothDraw<'_>> = s
                .cloths
                .iter()
                .map(|(p, i, tint)| ClothDraw {
                    positions: p,
                    indices: i,
                    tint: Some(*tint),
                })
                .collect();
            render::render_cloths(&s.camera, &draws, None, &s.bodies, &style, 320, 240)
        })
        .collect();
    render::save_sheet(&tiles, SHOTS.len() as u32, path)
}

fn main() {
    if let Err(e) = main_inner() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn main_inner() -> Result<(), Box<dyn std::error::Error>> {
    let mut preset = BudgetPreset::console();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--preset" => {
                let name = args
                    .next()
                    .ok_or("--preset takes mobile, console, desktop or FILE.ron")?;
                preset = preset_arg::preset_named(&name)?;
            }
            other => {
                return Err(format!("unknown argument {other:?} (option: --preset NAME)").into());
            }
        }
    }
    let settings = preset.settings(DT, DVec3::new(0.0, -9.81, 0.0))?;
    let out_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&out_dir)?;
    let mut shots = Vec::new();
    let runs = [Run::Layers, Run::Off, Run::SkirtAlone, Run::CapeAlone];
    let mut figures = Vec::new();
    for which in runs {
        figures.push(run(which, settings, &mut shots)?);
    }
    let sheet = out_dir.join("layers_contact_sheet.png");
    contact_sheet(&shots, &sheet)?;
    let thickness = LayerSettings::default().thickness;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
    let strain_ratio = ratio(figures[0].skirt_max_strain, figures[2].skirt_max_strain).max(ratio(
        figures[0].cape_max_strain,
        figures[3].cape_max_strain,
    ));
    println!(
        "skirt under a cape, Animation::Sit 10 s, preset {} ({} x {}), layer thickness {} m",
        preset.name, preset.substeps, preset.iterations, thickness
    );
    println!(
        "{:<12} {:>9} {:>9} {:>14} {:>12} {:>11} {:>9}",
        "run", "crossings", "frames", "min sep (mm)", "skirt strain", "cape strain", "step ms"
    );
    for (which, f) in runs.iter().zip(&figures) {
        let two = matches!(which, Run::Layers | Run::Off);
        let sep = if two && f.min_separation_m.is_finite() {
            format!("{:.2}", f.min_separation_m * 1e3)
        } else {
            "-".into()
        };
        println!(
            "{:<12} {:>9} {:>9} {:>14} {:>11.2}% {:>10.2}% {:>9.3}",
            which.name(),
            if two {
                f.crossings.to_string()
            } else {
                "-".into()
            },
            if two {
                f.crossing_frames.to_string()
            } else {
                "-".into()
            },
            sep,
            f.skirt_max_strain * 100.0,
            f.cape_max_strain * 100.0,
            f.median_ms()
        );
    }
    println!("strain with layers over strain alone (larger of the two cloths): {strain_ratio:.2}");
    println!(
        "contact sheet (top: layers, bottom: off): {}",
        sheet.display()
    );
    let json_num = |x: f64| {
        if x.is_finite() {
            format!("{x:.6}")
        } else {
            "null".into()
        }
    };
    let per_run: Vec<String> = runs
        .iter()
        .zip(&figures)
        .map(|(which, f)| {
            format!(
                "\"{}\":{{\"crossings\":{},\"crossing_frames\":{},\"min_separation_m\":{},\"skirt_max_strain\":{:.6},\"cape_max_strain\":{:.6},\"max_strain\":{:.6},\"step_ms_median\":{:.4}}}",
                which.name(),
                f.crossings,
                f.crossing_frames,
                json_num(f.min_separation_m),
                f.skirt_max_strain,
                f.cape_max_strain,
                f.skirt_max_strain.max(f.cape_max_strain),
                f.median_ms()
            )
        })
        .collect();
    println!(
        "{{\"preset\":\"{}\",\"thickness_m\":{},\"frames\":{},\"crossings\":{},\"min_separation_m\":{},\"max_strain\":{:.6},\"step_ms_median\":{:.4},\"strain_ratio\":{:.4},\"runs\":{{{}}},\"contact_sheet\":\"{}\"}}",
        preset.name,
        thickness,
        FRAMES,
        figures[0].crossings,
        json_num(figures[0].min_separation_m),
        figures[0].skirt_max_strain.max(figures[0].cape_max_strain),
        figures[0].median_ms(),
        strain_ratio,
        per_run.join(","),
        sheet.display()
    );
    Ok(())
}
