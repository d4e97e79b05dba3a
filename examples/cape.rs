//! The main demo: a cape on a character that walks, runs, turns and stops, through the bevy_ecs layer (about 3 s).
//!
//! The main demo: a procedural character (15 bones, 13 of them with collision capsules) walks,
//! runs, turns and stops for 10 s at 60 Hz with a cape hung from its shoulders, all through the
//! bevy_ecs layer (`isocloth::ecs`): bone entities carry `BonePose` and `BoneCollider`, the cape
//! entity carries `ClothSim`, `ClothAttachments` (skinned to the clavicles and chest) and
//! `ClothRenderMesh`, and one schedule run is one 1/60 s tick. With `--limits` the cape gets
//! the demo's game constraints (`rig::demo_cape_limits`): max distance around its skinned pose,
//! from 0 at the collar to 0.4 m at the hem, and a backstop 1 cm behind it, toward the back.
//! They are off by default: on this character they raise the cape's strain (its skinned pose
//! runs through the swinging arms, which push the cloth past its max distance; see
//! `docs/lab/2026-11-25-game-constraints.md`).
//!
//! Writes a contact sheet and frames under `target/isocloth/` (shaded triangles and capsules in
//! perspective, drawn with tiny-skia), prints a summary table, then one JSON line.
//!
//! Run: `cargo run --release --example cape [-- --limits] [--reference [PRESET]]` (alone,
//! `--reference` is the converged inextensible cloth, `presets/reference.ron`, drawn in
//! blue-grey on the contact sheet and frames beside the demo's cape). JSON figures:
//! `max_strain`, `mean_strain`, `max_penetration_m`, `nodes_inside_body` (the most cape nodes
//! inside any body at the end of a tick, over the run), `step_ms_median`, `step_ms_p99`,
//! `step_ms_max` and the counted work `work_median`, `work_p99`, `work_max`
//! (`isocloth::counters`) with `degraded_frames`, the run's settings, and with `--reference` the trajectory error (`trajectory_error`, the worst
//! centre-of-mass distance from the same scene at that converged budget, ticked beside it,
//! over the cape's size, over the first `trajectory_window_frames` = 180 frames; about a
//! minute more), else null.

#[path = "common/cape_scene.rs"]
mod cape_scene;
#[path = "common/preset_arg.rs"]
mod preset_arg;
#[path = "common/render.rs"]
mod render;

use cape_scene::{CapeScene, DT};
use isocloth::counters::FrameCosts;
use isocloth::ecs::ClothConfig;
use isocloth::rig::{BONES, CharacterRig};
use isocloth::tuning::{self, TrajectoryError};
use render::{Camera, Grid, Style};
use tiny_skia::Pixmap;

const FRAMES: usize = 600;
/// Frames the trajectory error is taken over (`--reference`).
const WINDOW: usize = 180;

/// The demo's ground: a grid of 1 m squares around the character.
fn style(ground_center: glam::DVec3) -> Style {
    Style {
        ground: Some(Grid {
            height: 0.0,
            center: ground_center,
            spacing: 1.0,
            lines: 8,
        }),
        body_outlines: false,
        far_body_depth: false,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&out_dir)?;

    let (mut limits, mut reference) = (false, None);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut k = 0;
    while k < args.len() {
        match (args[k].as_str(), args.get(k + 1)) {
            ("--limits", _) => limits = true,
            ("--reference", Some(rung)) if !rung.starts_with("--") => {
                reference = Some(preset_arg::preset_named(rung)?);
                k += 1;
            }
            // Alone, the converged inextensible cloth (`presets/reference.ron`).
            ("--reference", _) => reference = Some(preset_arg::preset_named("reference")?),
            (other, _) => {
                eprintln!(
                    "error: unknown argument `{other}` (options: --limits, --reference [PRESET])"
                );
                std::process::exit(1);
            }
        }
        k += 1;
    }
    let config = ClothConfig::default();
    let mut scene = CapeScene::new(config.clone(), limits)?;
    // The same scene at the converged budget, ticked beside the demo (not timed), for the
    // trajectory error.
    let mut converged = reference
        .as_ref()
        .map(|b| {
            CapeScene::new(
                ClothConfig {
                    budget: b.clone(),
                    ..config.clone()
                },
                limits,
            )
        })
        .transpose()?;
    let size = tuning::cloth_size(scene.sim().cloth.positions());
    let (mut path, mut converged_path) = (Vec::with_capacity(FRAMES), Vec::new());
    let node_count = scene.sim().cloth.positions().len();

    let (sheet_w, sheet_h, cols, rows) = (1280u32, 720u32, 4u32, 3u32);
    let (tile_w, tile_h) = (sheet_w / cols, sheet_h / rows);
    let mut sheet_tiles: Vec<Pixmap> = Vec::new();
    let tiles = (cols * rows) as usize;
    let mut costs = FrameCosts::with_capacity(FRAMES);
    let mut degraded_frames = 0u32;
    let (mut max_strain, mut mean_strain, mut max_pen) = (0.0f64, 0.0f64, 0.0f64);
    let mut pinned_max_strain = 0.0f64;
    let mut inside = 0usize;
    let mut iterations = 0;
    let mut rows_out = Vec::new();
    let mut phase_stats: Vec<(&str, f64, f64, f64)> = Vec::new();
    let mut written = Vec::new();
    for frame in 0..FRAMES {
        let t = frame as f64 * DT;
        let ms = scene.tick();
        if let Some(c) = &mut converged {
            c.tick();
            converged_path.push(c.sim().cloth.center_of_mass());
        }
        let (phase, speed) = (scene.walker.phase_name(), scene.walker.speed());
        let sim = scene.sim();
        costs.record(sim.last_step.counters.work(), ms);
        degraded_frames += u32::from(sim.last_step.counters.degraded());
        path.push(sim.cloth.center_of_mass());
        if let Some(e) = &sim.last_error {
            return Err(format!("frame {frame}: {e}").into());
        }
        iterations = sim.last_step.iterations;
        let m = sim.cloth.measures();
        let pen = scene.colliders().max_penetration(
            sim.cloth.positions(),
            sim.cloth.contact_settings().thickness,
        );
        max_strain = max_strain.max(m.max_strain);
        mean_strain = mean_strain.max(m.mean_strain);
        pinned_max_strain = pinned_max_strain.max(m.pinned_max_strain);
        max_pen = max_pen.max(pen);
        inside = inside.max(cape_scene::nodes_inside(
            scene.colliders(),
            sim.cloth.positions(),
        ));
        match phase_stats.last_mut() {
            Some(p) if p.0 == phase => {
                p.1 = p.1.max(m.max_strain);
                p.2 = p.2.max(m.mean_strain);
                p.3 = p.3.max(pen);
            }
            _ => phase_stats.push((phase, m.max_strain, m.mean_strain, pen)),
        }
        let tile = frame * tiles / FRAMES;
        let first_of_tile = frame == tile * FRAMES / tiles;
        let want_frame = frame % 120 == 0 || frame == FRAMES - 1;
        if first_of_tile || want_frame {
            let mesh = scene.mesh();
            let bodies = scene.bodies();
            let target = scene.camera_target();
            let (position, heading) = (scene.walker.position, scene.walker.heading);
            // With `--reference`, the converged cape is drawn too, in blue-grey: where the two
            // part, the demo's red cape shows beside it.
            let reference_mesh = converged.as_ref().map(|c| c.mesh());
            let draw = |w: u32, h: u32| {
                let cam = Camera::following(target, heading, w, h);
                let mut cloths = Vec::new();
                if let Some(r) = reference_mesh {
                    cloths.push(render::ClothDraw {
                        positions: &r.positions,
                        indices: &r.indices,
                        tint: Some((0.55, 0.63, 0.78)),
                    });
                }
                cloths.push(render::ClothDraw {
                    positions: &mesh.positions,
                    indices: &mesh.indices,
                    tint: None,
                });
                render::render_cloths(&cam, &cloths, None, &bodies, &style(position), w, h)
            };
            if first_of_tile {
                sheet_tiles.push(draw(tile_w, tile_h));
                rows_out.push((t, phase, speed, m.max_strain, m.mean_strain, pen, ms));
            }
            if want_frame {
                let img = draw(640, 480);
                let path = out_dir.join(format!("cape_{frame:03}.png"));
                img.save_png(&path)?;
                written.push(path);
            }
        }
    }
    let sheet_path = out_dir.join("cape_contact_sheet.png");
    render::save_sheet(&sheet_tiles, cols, &sheet_path)?;

    println!(
        "isocloth cape: {} bones ({} capsules), cape of {node_count} nodes, budget {} ({} x {}), 60 Hz, {FRAMES} frames, {}",
        BONES.len(),
        (0..BONES.len())
            .filter(|&b| CharacterRig::bone_collider(b).is_some())
            .count(),
        config.budget.name,
        config.budget.substeps,
        config.budget.iterations,
        if limits {
            "max distance 0-0.4 m and backstop 1 cm"
        } else {
            "no game constraints"
        }
    );
    println!();
    println!(
        "{:>6} {:>6} {:>11} {:>11} {:>12} {:>16} {:>10}",
        "t (s)",
        "phase",
        "speed (m/s)",
        "max strain",
        "mean strain",
        "penetration (m)",
        "step (ms)"
    );
    for (t, phase, speed, ms_, mean, pen, ms) in &rows_out {
        println!(
            "{t:>6.2} {phase:>6} {speed:>11.2} {ms_:>11.2e} {mean:>12.2e} {pen:>16.2e} {ms:>10.3}"
        );
    }
    println!();
    println!(
        "{:>6} {:>11} {:>12} {:>16}",
        "phase", "max strain", "mean strain", "penetration (m)"
    );
    for (phase, ms_, mean, pen) in &phase_stats {
        println!("{phase:>6} {ms_:>11.2e} {mean:>12.2e} {pen:>16.2e}");
    }
    let c = costs.summary();
    let (median, p99) = (c.step_ms_median, c.step_ms_p99);
    println!();
    println!(
        "step (whole ECS tick): median {median:.3} ms, p99 {p99:.3} ms, max {:.3} ms; {iterations} iterations per tick",
        c.step_ms_max
    );
    println!(
        "work per tick (isocloth::counters): median {:.0}, p99 {:.0}, max {:.0}; {degraded_frames} ticks degraded",
        c.work_median, c.work_p99, c.work_max
    );
    println!("nodes inside a body: at most {inside} at a tick's end");
    // Over the first 3 s: the running cape turns chaotic after (docs/design.md section 6).
    let trajectory = converged
        .is_some()
        .then(|| TrajectoryError::between(&path, &converged_path, size, Some(WINDOW)));
    if let (Some(t), Some(b)) = (&trajectory, &reference) {
        println!(
            "trajectory error against {} x {}: {:.2} % of the cape's {size:.2} m (worst at frame {}, first {} frames)",
            b.substeps,
            b.iterations,
            100.0 * t.error,
            t.frame,
            t.window_frames
        );
    }
    println!("pictures: {}", sheet_path.display());
    for p in &written {
        println!("          {}", p.display());
    }
    let json = serde_json::json!({
        "frames": FRAMES,
        "nodes": node_count,
        "bones": BONES.len(),
        "budget": config.budget.name,
        "iterations": iterations,
        "step_ms_median": median,
        "step_ms_p99": p99,
        "step_ms_max": c.step_ms_max,
        "work_median": c.work_median,
        "work_p99": c.work_p99,
        "work_max": c.work_max,
        "degraded_frames": degraded_frames,
        "max_strain": max_strain,
        "pinned_max_strain": pinned_max_strain,
        "mean_strain": mean_strain,
        "max_penetration_m": max_pen,
        "nodes_inside_body": inside,
        "limits": limits,
        "contact_sheet": sheet_path.display().to_string(),
        "reference": reference.as_ref().map(|b| format!("{}x{}", b.substeps, b.iterations)),
        "trajectory_error": trajectory.map(|t| t.error).filter(|e| e.is_finite()),
        "trajectory_window_frames": trajectory.map(|t| t.window_frames),
    });
    println!("{json}");
    Ok(())
}
