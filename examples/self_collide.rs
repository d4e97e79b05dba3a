//! Self-collision: a sheet folding onto itself, the demo cape and a squeezed tube, with exact crossing counts (about 20 s).
//!
//! Self-collision (`isocloth::self_contact`): three scenes in which cloth meets itself, at 60 Hz
//! with self-collision on (thickness 4 mm):
//!
//! 1. **pile**: a 1 m sheet (16 x 16 cells) dropped from 0.5 m, tilted 60 degrees and turned, so
//!    that it lands edge first and folds onto itself in piles on the ground; 3 s.
//! 2. **cape**: the `cape` demo's character walking, running, turning and stopping (10 s) with
//!    its cape, through the bevy_ecs layer.
//! 3. **tube**: a skirt-like cylinder of cloth (radius 0.15 m, 0.45 m long) hanging from its top
//!    ring, squeezed flat between two capsules that close in from both sides to 4 cm apart,
//!    hold, and open again; 3 s.
//!
//! Crossed triangle pairs are counted after every step by an exact triangle-triangle test
//! (`self_contact::self_intersections`) over the render mesh: `self_intersections` is the most
//! at the end of any step. Strain: render-mesh strain (docs/design.md section 6).
//!
//! Writes a contact sheet `target/isocloth/self_collide_contact_sheet.png`, prints a table, then
//! one JSON line with, per scene, `self_intersections`, `max_strain`, `mean_strain`,
//! `max_penetration_m` and `step_ms_median`.
//!
//! Run: `cargo run --release --example self_collide [-- --preset mobile|console|desktop]
//! [--scene pile|cape|tube] [--off]` (`--off`: self-collision off, to compare; default console).

#[path = "common/cape_scene.rs"]
mod cape_scene;
#[path = "common/preset_arg.rs"]
mod preset_arg;
#[path = "common/render.rs"]
mod render;

use std::time::Instant;

use glam::{DQuat, DVec3, Vec3};
use isocloth::ecs::{BudgetPreset, ClothConfig};
use isocloth::self_contact::self_intersections;
use isocloth::{
    BaseMesh, Cloth, ClothMesh, ColliderSet, ColliderShape, Material, Pose, SelfCollisionSettings,
    SolverSettings,
};
use render::{Camera, Grid, Style};
use tiny_skia::Pixmap;

const DT: f64 = 1.0 / 60.0;
/// Snapshots per scene in the contact sheet.
const TILES: usize = 4;

/// Figures of one scene.
#[derive(Default)]
struct Figures {
    name: &'static str,
    frames: usize,
    self_intersections: usize,
    max_strain: f64,
    mean_strain: f64,
    pinned_max_strain: f64,
    max_penetration_m: f64,
    times_ms: Vec<f64>,
}

impl Figures {
    fn record(&mut self, cloth: &Cloth, colliders: &ColliderSet, ms: f64) {
        let m = cloth.measures();
        self.frames += 1;
        self.max_strain = self.max_strain.max(m.max_strain);
        self.mean_strain = self.mean_strain.max(m.mean_strain);
        self.pinned_max_strain = self.pinned_max_strain.max(m.pinned_max_strain);
        let thickness = cloth.contact_settings().thickness;
        self.max_penetration_m = self
            .max_penetration_m
            .max(colliders.max_penetration(cloth.positions(), thickness));
        let crossed =
            self_intersections(cloth.model().mesh().render_triangles(), cloth.positions());
        self.self_intersections = self.self_intersections.max(crossed);
        self.times_ms.push(ms);
    }

    fn median_ms(&self) -> f64 {
        let mut s = self.times_ms.clone();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    }
}

/// One picture of a scene: the cloth's positions and triangles, the bodies, a camera.
struct Shot {
    positions: Vec<Vec3>,
    indices: Vec<u32>,
    bodies: Vec<(ColliderShape, Pose)>,
    camera: Camera,
    ground: Option<DVec3>,
}

fn shot(cloth: &Cloth, bodies: Vec<(ColliderShape, Pose)>, camera: Camera, ground: bool) -> Shot {
    Shot {
        positions: cloth.positions().iter().map(|p| p.as_vec3()).collect(),
        indices: cloth
            .model()
            .mesh()
            .render_triangles()
            .iter()
            .flatten()
            .copied()
            .collect(),
        bodies,
        camera,
        ground: ground.then_some(DVec3::ZERO),
    }
}

/// Whether frame `frame` of `frames` is one of the scene's snapshot frames.
fn snapshot(frame: usize, frames: usize) -> bool {
    (0..TILES).any(|k| frame == (k + 1) * frames / TILES - 1)
}

fn settings(preset: &BudgetPreset) -> Result<SolverSettings, Box<dyn std::error::Error>> {
    Ok(preset.settings(DT, DVec3::new(0.0, -9.81, 0.0))?)
}

/// The pile: a tilted, turned sheet dropped edge first on the ground.
fn pile(
    preset: &BudgetPreset,
    self_collision: SelfCollisionSettings,
    shots: &mut Vec<Shot>,
) -> Result<Figures, Box<dyn std::error::Error>> {
    let tilt = DQuat::from_rotation_y(0.6) * DQuat::from_rotation_x(-std::f64::consts::FRAC_PI_3);
    let base = BaseMesh::rectangle(1.0, 1.0, 16, 16)?.map_positions(|p| {
        // Centre on the origin, lay flat in XZ, tilt, lift the lowest point to 0.5 m.
        let q = DVec3::new(f64::from(p.x) - 0.5, 0.0, f64::from(p.y) - 0.5);
        (tilt * q + DVec3::new(0.0, 0.5 + 0.5 * (std::f64::consts::FRAC_PI_3).sin(), 0.0)).as_vec3()
    });
    let mut cloth = Cloth::from_mesh(
        ClothMesh::new(&base)?,
        Material::default(),
        &[],
        settings(preset)?,
    )?;
    cloth.set_self_collision(self_collision)?;
    let mut colliders = ColliderSet::new();
    colliders.add(ColliderShape::Plane, Pose::default())?;
    let frames = 180;
    let mut fig = Figures {
        name: "pile",
        ..Default::default()
    };
    for frame in 0..frames {
        let t = Instant::now();
        cloth.step_with(DT, &colliders)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        colliders.finish_frame();
        fig.record(&cloth, &colliders, ms);
        if snapshot(frame, frames) {
            // Looking down at the sheet from above and to the side of where it lies.
            let x = cloth.positions();
            let centre = x.iter().sum::<DVec3>() / x.len() as f64;
            let cam = Camera::look_at(centre + DVec3::new(1.0, 1.6, 1.4), centre, 0.8, 320, 240);
            shots.push(shot(&cloth, Vec::new(), cam, true));
        }
    }
    Ok(fig)
}

/// The cape demo's character and cape with self-collision, through the ECS layer.
fn cape(
    preset: &BudgetPreset,
    self_collision: SelfCollisionSettings,
    shots: &mut Vec<Shot>,
) -> Result<Figures, Box<dyn std::error::Error>> {
    let config = ClothConfig {
        budget: preset.clone(),
        self_collision,
        ..Default::default()
    };
    let mut scene = cape_scene::CapeScene::new(config, false)?;
    let frames = 600;
    let mut fig = Figures {
        name: "cape",
        ..Default::default()
    };
    for frame in 0..frames {
        let ms = scene.tick();
        fig.record(&scene.sim().cloth, scene.colliders(), ms);
        if snapshot(frame, frames) {
            let cam = Camera::following(scene.camera_target(), scene.walker.heading, 320, 240);
            shots.push(shot(&scene.sim().cloth, scene.bodies(), cam, true));
        }
    }
    Ok(fig)
}

/// Where the squeezing capsules' axes are (distance from the tube's axis) at time `t`.
fn squeeze_offset(t: f64, radius: f64) -> f64 {
    let (open, closed) = (0.32, radius + 0.02);
    let s = match t {
        t if t < 0.3 => 0.0,
        t if t < 1.3 => (t - 0.3) / 1.0,
        t if t < 2.0 => 1.0,
        t if t < 2.5 => 1.0 - (t - 2.0) / 0.5,
        _ => 0.0,
    };
    let s = s * s * (3.0 - 2.0 * s);
    open + (closed - open) * s
}

/// The tube squeezed between two capsules.
fn tube(
    preset: &BudgetPreset,
    self_collision: SelfCollisionSettings,
    shots: &mut Vec<Shot>,
) -> Result<Figures, Box<dyn std::error::Error>> {
    let (around, along) = (24, 8);
    let base =
        BaseMesh::tube(0.15, 0.45, around, along)?.map_positions(|p| p + Vec3::new(0.0, 0.55, 0.0));
    let mesh = ClothMesh::new(&base)?;
    let top: Vec<u32> = (0..around as u32)
        .map(|i| i + (along * around) as u32)
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, settings(preset)?)?;
    cloth.set_self_collision(self_collision)?;
    let radius = 0.05;
    let capsule = ColliderShape::Capsule {
        half_height: 0.3,
        radius,
    };
    let along_z = DQuat::from_rotation_x(std::f64::consts::FRAC_PI_2);
    let pose = |side: f64, t: f64| {
        Pose::new(
            DVec3::new(side * squeeze_offset(t, radius), 0.75, 0.0),
            along_z,
        )
    };
    let mut colliders = ColliderSet::new();
    let ids = [
        colliders.add(capsule.clone(), pose(1.0, 0.0))?,
        colliders.add(capsule.clone(), pose(-1.0, 0.0))?,
    ];
    let frames = 180;
    let mut fig = Figures {
        name: "tube",
        ..Default::default()
    };
    for frame in 0..frames {
        let t = (frame + 1) as f64 * DT;
        colliders.set_pose(ids[0], pose(1.0, t))?;
        colliders.set_pose(ids[1], pose(-1.0, t))?;
        let start = Instant::now();
        cloth.step_with(DT, &colliders)?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        colliders.finish_frame();
        fig.record(&cloth, &colliders, ms);
        if snapshot(frame, frames) {
            let cam = Camera::look_at(
                DVec3::new(0.55, 1.15, 0.75),
                DVec3::new(0.0, 0.8, 0.0),
                0.8,
                320,
                240,
            );
            let bodies = vec![
                (capsule.clone(), pose(1.0, t)),
                (capsule.clone(), pose(-1.0, t)),
            ];
            shots.push(shot(&cloth, bodies, cam, false));
        }
    }
    Ok(fig)
}

fn contact_sheet(shots: &[Shot], path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let tiles: Vec<Pixmap> = shots
        .iter()
        .map(|s| {
            let style = Style {
                ground: s.ground.map(|center| Grid {
                    height: 0.0,
                    center,
                    spacing: 0.25,
                    lines: 8,
                }),
                body_outlines: true,
                far_body_depth: false,
            };
            render::render(
                &s.camera,
                &s.positions,
                &s.indices,
                &s.bodies,
                &style,
                320,
                240,
            )
        })
        .collect();
    render::save_sheet(&tiles, TILES as u32, path)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut preset = BudgetPreset::console();
    let mut enabled = true;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--preset" => {
                let name = args
                    .next()
                    .ok_or("--preset takes mobile, console, desktop or FILE.ron")?;
                preset = preset_arg::preset_named(&name)?;
            }
            "--off" => enabled = false,
            "--scene" => only = Some(args.next().ok_or("--scene takes pile, cape or tube")?),
            other => {
                return Err(format!(
                    "unknown argument {other:?} (options: --preset NAME, --scene NAME, --off)"
                )
                .into());
            }
        }
    }
    let self_collision = SelfCollisionSettings {
        enabled,
        ..Default::default()
    };
    let out_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&out_dir)?;
    let mut shots = Vec::new();
    type Scene = fn(
        &BudgetPreset,
        SelfCollisionSettings,
        &mut Vec<Shot>,
    ) -> Result<Figures, Box<dyn std::error::Error>>;
    let all: [(&str, Scene); 3] = [("pile", pile), ("cape", cape), ("tube", tube)];
    if let Some(name) = &only
        && !all.iter().any(|(n, _)| n == name)
    {
        return Err(format!("unknown scene {name:?} (pile, cape or tube)").into());
    }
    let mut scenes = Vec::new();
    for (name, run) in all {
        if only.as_deref().is_none_or(|o| o == name) {
            scenes.push(run(&preset, self_collision, &mut shots)?);
        }
    }
    let sheet = out_dir.join("self_collide_contact_sheet.png");
    contact_sheet(&shots, &sheet)?;

    println!(
        "self-collision {} (thickness {} m), preset {} ({} x {})",
        if enabled { "on" } else { "off" },
        self_collision.thickness,
        preset.name,
        preset.substeps,
        preset.iterations
    );
    println!(
        "{:<6} {:>7} {:>18} {:>10} {:>11} {:>12} {:>9}",
        "scene",
        "frames",
        "self_intersections",
        "max strain",
        "mean strain",
        "penetration",
        "step ms"
    );
    for s in &scenes {
        println!(
            "{:<6} {:>7} {:>18} {:>9.2}% {:>10.3}% {:>10.2}mm {:>9.3}",
            s.name,
            s.frames,
            s.self_intersections,
            s.max_strain * 100.0,
            s.mean_strain * 100.0,
            s.max_penetration_m * 1e3,
            s.median_ms()
        );
    }
    println!("contact sheet: {}", sheet.display());
    let per_scene: Vec<String> = scenes
        .iter()
        .map(|s| {
            format!(
                "\"{}\":{{\"self_intersections\":{},\"max_strain\":{:.6},\"mean_strain\":{:.6},\"pinned_max_strain\":{:.6},\"max_penetration_m\":{:.6},\"step_ms_median\":{:.4},\"frames\":{}}}",
                s.name,
                s.self_intersections,
                s.max_strain,
                s.mean_strain,
                s.pinned_max_strain,
                s.max_penetration_m,
                s.median_ms(),
                s.frames
            )
        })
        .collect();
    println!(
        "{{\"preset\":\"{}\",\"self_collision\":{},\"thickness_m\":{},\"scenes\":{{{}}},\"contact_sheet\":\"{}\"}}",
        preset.name,
        enabled,
        self_collision.thickness,
        per_scene.join(","),
        sheet.display()
    );
    Ok(())
}
