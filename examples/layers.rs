//! Layers: a character with a skirt and a cape over it walks, runs, stops and sits down (10 s), with cloth-against-cloth contact on and off (four runs interleaved frame by frame, about 16 s).
//!
//! Layers (`isocloth::layers`, `isocloth::layering`): two cloths on the procedural character
//! of `isocloth::rig`, stepped as one layer group. Two scenes (`--scene`):
//!
//! - **skirt** (the default): `Animation::Sit` (walk 2 s, run 2 s, stop, sit down on a seat
//!   from 5 s, seated to 10 s) wearing a flared skirt pinned at the waist (rigid pins on the
//!   pelvis) and a cape pinned at the shoulders that hangs over the skirt's back. The skirt is
//!   the inner layer, the cape the outer.
//! - **mantle**: `Animation::Demo` (walk, run, turn, stop; 10 s) wearing the demo's cape
//!   (0.5 x 0.9 m) and a 0.56 x 0.45 m mantle over it, 1 cm farther out, both skinned to the
//!   shoulders with the demo's inertia scales. The cape is the inner layer, the mantle the
//!   outer.
//!
//! Four runs of the same clip at 60 Hz:
//!
//! - **layers**: the two cloths meet (`ClothLayers`, thickness 5 mm);
//! - **off**: both cloths, layers off (they pass through each other);
//! - **inner alone** and **outer alone** (`skirt_alone`, `cape_alone`; `cape_alone`,
//!   `mantle_alone`): each cloth without the other.
//!
//! Crossings are counted after every frame, the same way in every run, by an exact
//! triangle-triangle test between the two cloths' render meshes (`layers::layer_crossings`):
//! `crossings` sums them over the clip (`crossing_frames` counts frames with any).
//! `min_separation_m` is the least distance between the cloths' features within 5 cm, over the
//! clip. Strain: render-mesh strain without edges pinned at both ends (docs/design.md section 6).
//!
//! Writes a contact sheet `target/isocloth/layers_contact_sheet.png` (`layers_mantle_...` for
//! the mantle; top row layers on, bottom row off), prints a table, then one JSON line: the
//! scene, per run `crossings`, `crossing_frames`, `min_separation_m`, each cloth's
//! `<name>_max_strain`, `max_strain`, `step_ms_median` (the two cloths' frame), and
//! `strain_ratio` (each cloth's max strain with layers over its value alone; the larger of
//! the two) and `step_ratio` (the layered step's median over the two alone runs' medians
//! summed). The four runs are interleaved frame by frame (each first in turn), so their frame
//! times see the same machine: a machine whose speed drifts over seconds moves every run's
//! median alike and leaves `step_ratio` steady.
//!
//! Run: `cargo run --release --example layers [-- --scene skirt|mantle] [--preset
//! mobile|console|desktop]` (default skirt, console).

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

/// The skirt: 0.4 m of cloth from the waist (radius 0.2 m at 1.05 m) to the hem (0.36 m),
/// 24 x 6 base cells, its top ring pinned, cut with room for the seated hips (see
/// [`skirt_radius`]).
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

/// The skirt's radius at height `y` (with `margin` added), as built: a waist-to-hip curve,
/// `0.2 + 0.16 * depth^0.35` (`depth` 0 at the waist, 1 at the hem). Seated, the hips (pelvis
/// and thigh capsules) are 1.49 m around 3 cm under the waist; this cut is 1.66 m there. A
/// straight cone (`0.2 + 0.16 * depth`, 1.33 m there) cannot hold the seated hips without
/// stretching: it strained 59.7 % alone at console (41 % at 16 x 80), wherever the budget.
fn skirt_radius(y: f32, margin: f32) -> f32 {
    let depth = ((SKIRT_TOP - y) / SKIRT_LENGTH).clamp(0.0, 1.0);
    0.2 + 0.16 * depth.powf(0.35) + margin
}

/// The skirt's length and the height of its waist (m).
const SKIRT_LENGTH: f32 = 0.4;
const SKIRT_TOP: f32 = 1.05;

/// The cape: the demo cape's size (0.5 x 0.9 m, 10 x 18 cells) hanging from the shoulders at
/// z = -0.19 m; with `wrap`, its lower part wrapped 3 cm outside the skirt's back.
fn cape(settings: SolverSettings, wrap: bool) -> Result<Cloth, Box<dyn std::error::Error>> {
    let (cx, cy) = (10, 18);
    let (width, length) = (0.5f32, 0.9f32);
    let base = BaseMesh::rectangle(width, length, cx, cy)?.map_positions(|p| {
        let (x, y) = (p.x - 0.5 * width, 1.46 - length + p.y);
        let r = skirt_radius(y, 0.03);
        let around = if wrap && y < 1.06 {
            (r * r - x * x).max(0.0).sqrt()
        } else {
            0.0
        };
        Vec3::new(x, y, -(0.19f32.max(around)))
    });
    let top: Vec<u32> = (0..=cx).map(|i| BaseMesh::grid_index(cx, i, cy)).collect();
    pinned_cloth(&base, &top, settings)
}

/// The mantle: 0.56 x 0.45 m (12 x 9 cells) from the shoulders at z = -0.20 m, 1 cm outside
/// the cape, its top row pinned.
fn mantle(settings: SolverSettings) -> Result<Cloth, Box<dyn std::error::Error>> {
    let (cx, cy) = (12, 9);
    let (width, length) = (0.56f32, 0.45f32);
    let base = BaseMesh::rectangle(width, length, cx, cy)?
        .map_positions(|p| Vec3::new(p.x - 0.5 * width, 1.46 - length + p.y, -0.20));
    let top: Vec<u32> = (0..=cx).map(|i| BaseMesh::grid_index(cx, i, cy)).collect();
    pinned_cloth(&base, &top, settings)
}

/// The two cloths a scene puts on the character.
#[derive(Clone, Copy, PartialEq)]
enum Scene {
    /// A skirt, a cape over it, sitting down.
    Skirt,
    /// The demo's cape, a mantle over it, running.
    Mantle,
}

impl Scene {
    fn name(self) -> &'static str {
        match self {
            Scene::Skirt => "skirt",
            Scene::Mantle => "mantle",
        }
    }

    /// The inner and the outer cloth's names.
    fn cloths(self) -> [&'static str; 2] {
        match self {
            Scene::Skirt => ["skirt", "cape"],
            Scene::Mantle => ["cape", "mantle"],
        }
    }

    fn animation(self) -> Animation {
        match self {
            Scene::Skirt => Animation::Sit,
            Scene::Mantle => Animation::Demo,
        }
    }
}

/// Which cloths a run steps.
#[derive(Clone, Copy, PartialEq)]
enum Run {
    Layers,
    Off,
    InnerAlone,
    OuterAlone,
}

impl Run {
    fn name(self, scene: Scene) -> String {
        match self {
            Run::Layers => "layers".into(),
            Run::Off => "off".into(),
            Run::InnerAlone => format!("{}_alone", scene.cloths()[0]),
            Run::OuterAlone => format!("{}_alone", scene.cloths()[1]),
        }
    }
}

/// Figures of one run.
#[derive(Default)]
struct Figures {
    crossings: usize,
    crossing_frames: usize,
    min_separation_m: f64,
    /// The inner and the outer cloth's max strain.
    max_strain: [f64; 2],
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

/// One run of the clip: its own character, colliders and cloths, stepped a frame at a time
/// ([`Sim::frame`]) so that `main` can interleave the four runs frame by frame: each run's
/// frame times then see the same machine (this machine's speed drifts over seconds), and the
/// step ratio compares like with like.
struct Sim {
    scene: Scene,
    which: Run,
    rig: CharacterRig,
    poses: Vec<Pose>,
    colliders: ColliderSet,
    bone_ids: Vec<(usize, ColliderId, Pose)>,
    seat_shape: ColliderShape,
    seat: ColliderId,
    seated: bool,
    inner_att: Attachments,
    outer_att: Attachments,
    layers: ClothLayers,
    cloths: Vec<Cloth>,
    reports: Vec<StepReport>,
    fig: Figures,
    shots: Vec<Shot>,
}

impl Sim {
    fn new(
        scene: Scene,
        which: Run,
        settings: SolverSettings,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let rig = CharacterRig::new(scene.animation(), DVec3::ZERO, 0.0);
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

        let (inner, inner_att, outer, outer_att) = match scene {
            Scene::Skirt => {
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
                // The cape's inertia scales (`demo_cape_attachments`: linear 0.8, angular 0.6),
                // so that the part of the pelvis's motion both cloths are carried by rigidly
                // before each step is the same: a carry that differed would move one layer
                // through the other outside the step, where no contact sees it.
                let rigid = AttachmentSettings {
                    rigid_pins: true,
                    linear_inertia: 0.8,
                    angular_inertia: 0.6,
                    ..Default::default()
                };
                let skirt_att = Attachments::bind(&skirt, &ring, &poses, 0, rigid)?;
                let cape = cape(settings, true)?;
                let cape_att = demo_cape_attachments(&cape, &poses)?;
                (skirt, skirt_att, cape, cape_att)
            }
            Scene::Mantle => {
                let cape = cape(settings, false)?;
                let cape_att = demo_cape_attachments(&cape, &poses)?;
                let mantle = mantle(settings)?;
                let mantle_att = demo_cape_attachments(&mantle, &poses)?;
                (cape, cape_att, mantle, mantle_att)
            }
        };
        let layers_on = which == Run::Layers;
        let cloths: Vec<Cloth> = match which {
            Run::Layers | Run::Off => vec![inner, outer],
            Run::InnerAlone => vec![inner],
            Run::OuterAlone => vec![outer],
        };
        let layers = if layers_on {
            ClothLayers::new(LayerSettings::default(), 2, &[[0, 1]])?
        } else {
            ClothLayers::new(LayerSettings::default(), cloths.len(), &[])?
        };
        Ok(Self {
            scene,
            which,
            rig,
            poses,
            colliders,
            bone_ids,
            seat_shape,
            seat,
            seated: false,
            inner_att,
            outer_att,
            layers,
            cloths,
            reports: Vec::new(),
            fig: Figures {
                min_separation_m: f64::INFINITY,
                ..Default::default()
            },
            shots: Vec::new(),
        })
    }

    /// Plays frame `frame`: the character, the cloths' step (timed), the figures and, at
    /// [`SHOTS`], a snapshot.
    fn frame(&mut self, frame: usize) -> Result<(), Box<dyn std::error::Error>> {
        let (scene, which, seat) = (self.scene, self.which, self.seat);
        let layers_on = which == Run::Layers;
        let has_inner = which != Run::OuterAlone;
        let has_outer = which != Run::InnerAlone;
        self.rig.advance(DT);
        self.rig.poses(&mut self.poses);
        for &(b, id, offset) in self.bone_ids.iter() {
            self.colliders.set_pose(id, self.poses[b].mul(&offset))?;
        }
        if scene == Scene::Skirt && !self.seated && self.rig.time() >= SEAT_AT {
            self.colliders.teleport(seat, self.rig.seat().1)?;
            self.seated = true;
        }
        let mut k = 0;
        if has_inner {
            self.inner_att.apply(&mut self.cloths[k], &self.poses)?;
            k += 1;
        }
        if has_outer {
            self.outer_att.apply(&mut self.cloths[k], &self.poses)?;
        }
        let start = Instant::now();
        if layers_on {
            self.layers
                .step(&mut self.cloths, DT, &self.colliders, &mut self.reports)?;
        } else {
            for c in self.cloths.iter_mut() {
                c.step_with(DT, &self.colliders)?;
            }
        }
        self.fig.times_ms.push(start.elapsed().as_secs_f64() * 1e3);
        self.colliders.finish_frame();
        let strain = |c: &Cloth| c.measures().max_strain;
        match which {
            Run::Layers | Run::Off => {
                let (a, b) = (&self.cloths[0], &self.cloths[1]);
                let pair = (
                    (render_triangles(a), a.positions()),
                    (render_triangles(b), b.positions()),
                );
                let crossed = layer_crossings(pair.0, pair.1);
                self.fig.crossings += crossed;
                self.fig.crossing_frames += (crossed > 0) as usize;
                self.fig.min_separation_m = self
                    .fig
                    .min_separation_m
                    .min(layer_separation(pair.0, pair.1, 0.05));
                self.fig.max_strain[0] = self.fig.max_strain[0].max(strain(a));
                self.fig.max_strain[1] = self.fig.max_strain[1].max(strain(b));
            }
            Run::InnerAlone => {
                self.fig.max_strain[0] = self.fig.max_strain[0].max(strain(&self.cloths[0]))
            }
            Run::OuterAlone => {
                self.fig.max_strain[1] = self.fig.max_strain[1].max(strain(&self.cloths[0]))
            }
        }
        if matches!(which, Run::Layers | Run::Off) && SHOTS.contains(&frame) {
            let target = self.rig.position + DVec3::new(0.0, 0.75, 0.0);
            let yaw = DQuat::from_rotation_y(self.rig.heading);
            let eye = target + yaw * DVec3::new(-1.3, 0.45, -1.6);
            let camera = Camera::look_at(eye, target, 0.8, 320, 240);
            let mut bodies: Vec<(ColliderShape, Pose)> = self
                .bone_ids
                .iter()
                .filter_map(|&(b, _, offset)| {
                    CharacterRig::bone_collider(b).map(|(s, _)| (s, self.poses[b].mul(&offset)))
                })
                .collect();
            if self.seated {
                bodies.push((self.seat_shape.clone(), self.rig.seat().1));
            }
            let colours = [(70.0, 120.0, 200.0), (190.0, 40.0, 45.0)];
            self.shots.push(Shot {
                cloths: self
                    .cloths
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
                ground: DVec3::new(self.rig.position.x, 0.0, self.rig.position.z),
            });
        }
        Ok(())
    }
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
    let mut scene = Scene::Skirt;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--scene" => {
                scene = match args.next().as_deref() {
                    Some("skirt") => Scene::Skirt,
                    Some("mantle") => Scene::Mantle,
                    _ => return Err("--scene takes skirt or mantle".into()),
                };
            }
            "--preset" => {
                let name = args
                    .next()
                    .ok_or("--preset takes mobile, console, desktop or FILE.ron")?;
                preset = preset_arg::preset_named(&name)?;
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (options: --scene NAME, --preset NAME)"
                )
                .into());
            }
        }
    }
    let settings = preset.settings(DT, DVec3::new(0.0, -9.81, 0.0))?;
    let out_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&out_dir)?;
    let runs = [Run::Layers, Run::Off, Run::InnerAlone, Run::OuterAlone];
    let mut sims = Vec::new();
    for which in runs {
        sims.push(Sim::new(scene, which, settings)?);
    }
    // The four runs interleaved frame by frame, each first in turn.
    for frame in 0..FRAMES {
        for k in 0..sims.len() {
            let n = sims.len();
            sims[(frame + k) % n].frame(frame)?;
        }
    }
    let mut shots = Vec::new();
    let mut figures = Vec::new();
    for sim in sims {
        shots.extend(sim.shots);
        figures.push(sim.fig);
    }
    let sheet = out_dir.join(match scene {
        Scene::Skirt => "layers_contact_sheet.png".to_string(),
        Scene::Mantle => "layers_mantle_contact_sheet.png".to_string(),
    });
    let [inner, outer] = scene.cloths();
    contact_sheet(&shots, &sheet)?;
    let thickness = LayerSettings::default().thickness;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
    let strain_ratio = ratio(figures[0].max_strain[0], figures[2].max_strain[0])
        .max(ratio(figures[0].max_strain[1], figures[3].max_strain[1]));
    let step_ratio = ratio(
        figures[0].median_ms(),
        figures[2].median_ms() + figures[3].median_ms(),
    );
    println!(
        "{inner} under a {outer}, Animation::{:?} 10 s, preset {} ({} x {}), layer thickness {} m",
        scene.animation(),
        preset.name,
        preset.substeps,
        preset.iterations,
        thickness
    );
    println!(
        "{:<12} {:>9} {:>9} {:>14} {:>13} {:>13} {:>9}",
        "run",
        "crossings",
        "frames",
        "min sep (mm)",
        format!("{inner} strain"),
        format!("{outer} strain"),
        "step ms"
    );
    for (which, f) in runs.iter().zip(&figures) {
        let two = matches!(which, Run::Layers | Run::Off);
        let sep = if two && f.min_separation_m.is_finite() {
            format!("{:.2}", f.min_separation_m * 1e3)
        } else {
            "-".into()
        };
        println!(
            "{:<12} {:>9} {:>9} {:>14} {:>12.2}% {:>12.2}% {:>9.3}",
            which.name(scene),
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
            f.max_strain[0] * 100.0,
            f.max_strain[1] * 100.0,
            f.median_ms()
        );
    }
    println!("strain with layers over strain alone (larger of the two cloths): {strain_ratio:.2}");
    println!("layered step over the two cloths alone (medians, interleaved runs): {step_ratio:.2}");
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
                "\"{}\":{{\"crossings\":{},\"crossing_frames\":{},\"min_separation_m\":{},\"{inner}_max_strain\":{:.6},\"{outer}_max_strain\":{:.6},\"max_strain\":{:.6},\"step_ms_median\":{:.4}}}",
                which.name(scene),
                f.crossings,
                f.crossing_frames,
                json_num(f.min_separation_m),
                f.max_strain[0],
                f.max_strain[1],
                f.max_strain[0].max(f.max_strain[1]),
                f.median_ms()
            )
        })
        .collect();
    println!(
        "{{\"scene\":\"{}\",\"preset\":\"{}\",\"thickness_m\":{},\"frames\":{},\"crossings\":{},\"min_separation_m\":{},\"max_strain\":{:.6},\"step_ms_median\":{:.4},\"strain_ratio\":{:.4},\"step_ratio\":{:.4},\"runs\":{{{}}},\"contact_sheet\":\"{}\"}}",
        scene.name(),
        preset.name,
        thickness,
        FRAMES,
        figures[0].crossings,
        json_num(figures[0].min_separation_m),
        figures[0].max_strain[0].max(figures[0].max_strain[1]),
        figures[0].median_ms(),
        strain_ratio,
        step_ratio,
        per_run.join(","),
        sheet.display()
    );
    Ok(())
}
