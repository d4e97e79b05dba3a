//! The main demo: a procedural character (15 bones, 13 of them with collision capsules) walks,
//! runs, turns and stops for 10 s at 60 Hz with a cape hung from its shoulders, all through the
//! bevy_ecs layer (`isocloth::ecs`): bone entities carry `BonePose` and `BoneCollider`, the cape
//! entity carries `ClothSim`, `ClothAttachments` (skinned to the clavicles and chest) and
//! `ClothRenderMesh`, and one schedule run is one 1/60 s tick.
//!
//! Writes a contact sheet and frames under `target/isocloth/` (shaded triangles and capsules in
//! perspective, drawn with tiny-skia), prints a summary table, then one JSON line.
//!
//! Run: `cargo run --release --example cape`.

use std::time::Instant;

use bevy_ecs::prelude::*;
use glam::{DMat4, DQuat, DVec3, DVec4};
use isocloth::ecs::{
    BonePose, ClothColliders, ClothConfig, ClothRenderMesh, ClothSim, DemoCharacter,
    add_cloth_systems, init_cloth_resources, spawn_demo_character,
};
use isocloth::rig::{Animation, BONES, CharacterRig};
use isocloth::{ColliderShape, Pose, SolverSettings};
use tiny_skia::{Color, FillRule, LineCap, Paint, PathBuilder, Pixmap, Stroke, Transform};

const FRAMES: usize = 600;
const DT: f64 = 1.0 / 60.0;

/// A pinhole camera following the character from behind and to its side.
struct Camera {
    eye: DVec3,
    view_proj: DMat4,
    width: f64,
    height: f64,
}

impl Camera {
    fn following(target: DVec3, heading: f64, width: u32, height: u32) -> Self {
        let back = DQuat::from_rotation_y(heading) * DVec3::new(1.6, 0.9, -2.6);
        let eye = target + back;
        let view = glam::dcamera::rh::view::look_at_mat4(eye, target, DVec3::Y);
        let proj = glam::dcamera::rh::proj::directx::perspective(
            0.8,
            width as f64 / height as f64,
            0.05,
            50.0,
        );
        Self {
            eye,
            view_proj: proj * view,
            width: width as f64,
            height: height as f64,
        }
    }

    /// Pixel coordinates and depth, or none behind the camera.
    fn project(&self, p: DVec3) -> Option<(f32, f32, f64)> {
        let c = self.view_proj * DVec4::new(p.x, p.y, p.z, 1.0);
        if c.w <= 1e-6 {
            return None;
        }
        let (x, y) = (c.x / c.w, c.y / c.w);
        Some((
            ((x * 0.5 + 0.5) * self.width) as f32,
            ((0.5 - y * 0.5) * self.height) as f32,
            c.w,
        ))
    }
}

enum Shape {
    Triangle([(f32, f32); 3], Color),
    Capsule((f32, f32), (f32, f32), f32, Color),
    Line((f32, f32), (f32, f32), Color),
}

/// Draws one frame: ground grid, character capsules and the cape, far to near.
fn render(
    cam: &Camera,
    mesh: &ClothRenderMesh,
    bodies: &[(ColliderShape, Pose)],
    ground_center: DVec3,
    width: u32,
    height: u32,
) -> Pixmap {
    let mut pixmap = Pixmap::new(width, height).expect("nonzero size");
    pixmap.fill(Color::from_rgba8(236, 240, 245, 255));
    let mut shapes: Vec<(f64, Shape)> = Vec::new();
    // Ground grid, 1 m squares around the character.
    let (gx, gz) = (ground_center.x.round(), ground_center.z.round());
    for k in -8..=8 {
        let k = k as f64;
        for (a, b) in [
            (
                DVec3::new(gx + k, 0.0, gz - 8.0),
                DVec3::new(gx + k, 0.0, gz + 8.0),
            ),
            (
                DVec3::new(gx - 8.0, 0.0, gz + k),
                DVec3::new(gx + 8.0, 0.0, gz + k),
            ),
        ] {
            if let (Some(p), Some(q)) = (cam.project(a), cam.project(b)) {
                shapes.push((
                    1e9,
                    Shape::Line(
                        (p.0, p.1),
                        (q.0, q.1),
                        Color::from_rgba8(200, 205, 215, 255),
                    ),
                ));
            }
        }
    }
    let light = DVec3::new(0.4, 0.8, -0.45).normalize();
    for (shape, pose) in bodies {
        let (a, b, r) = match *shape {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => (
                pose.transform_point(DVec3::new(0.0, -half_height, 0.0)),
                pose.transform_point(DVec3::new(0.0, half_height, 0.0)),
                radius,
            ),
            ColliderShape::Sphere { radius } => (pose.translation, pose.translation, radius),
            ColliderShape::Plane => continue,
        };
        if let (Some(p), Some(q)) = (cam.project(a), cam.project(b)) {
            let depth = 0.5 * (p.2 + q.2);
            let scale = (cam.height / (2.0 * (0.4f64).tan())) / depth;
            let axis = (b - a).normalize_or(DVec3::Y);
            let shade = 0.55 + 0.35 * axis.cross(light).length();
            let g = (150.0 * shade) as u8;
            shapes.push((
                depth,
                Shape::Capsule(
                    (p.0, p.1),
                    (q.0, q.1),
                    (2.0 * r * scale) as f32,
                    Color::from_rgba8(g / 2, g, (g as f32 * 1.3).min(255.0) as u8, 255),
                ),
            ));
        }
    }
    for t in mesh.indices.chunks_exact(3) {
        let [a, b, c] = [t[0], t[1], t[2]].map(|i| mesh.positions[i as usize].as_dvec3());
        let n = (b - a).cross(c - a).normalize_or(DVec3::Y);
        let (Some(p), Some(q), Some(r)) = (cam.project(a), cam.project(b), cam.project(c)) else {
            continue;
        };
        let lit = 0.35 + 0.65 * n.dot(light).abs();
        // The mesh's normals point at the wearer's back: the side seen from behind them is the
        // red outside, the other the gold lining.
        let centroid = (a + b + c) / 3.0;
        let outside = n.dot(cam.eye - centroid) < 0.0;
        let (cr, cg, cb) = if outside {
            (190.0, 40.0, 45.0)
        } else {
            (200.0, 160.0, 60.0)
        };
        let color = Color::from_rgba8((cr * lit) as u8, (cg * lit) as u8, (cb * lit) as u8, 255);
        shapes.push((
            (p.2 + q.2 + r.2) / 3.0,
            Shape::Triangle([(p.0, p.1), (q.0, q.1), (r.0, r.1)], color),
        ));
    }
    shapes.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut paint = Paint {
        anti_alias: true,
        ..Default::default()
    };
    for (_, shape) in shapes {
        match shape {
            Shape::Triangle(v, color) => {
                let mut pb = PathBuilder::new();
                pb.move_to(v[0].0, v[0].1);
                pb.line_to(v[1].0, v[1].1);
                pb.line_to(v[2].0, v[2].1);
                pb.close();
                if let Some(path) = pb.finish() {
                    paint.set_color(color);
                    pixmap.fill_path(
                        &path,
                        &paint,
                        FillRule::Winding,
                        Transform::identity(),
                        None,
                    );
                    // A hairline of the same colour closes the seams between triangles.
                    let stroke = Stroke {
                        width: 0.6,
                        ..Default::default()
                    };
                    pixmap.stroke_path(&path, &paint, &stroke, Transform::identity(), None);
                }
            }
            Shape::Capsule(a, b, width, color) => stroke_segment(&mut pixmap, a, b, width, color),
            Shape::Line(a, b, color) => stroke_segment(&mut pixmap, a, b, 1.0, color),
        }
    }
    pixmap
}

/// A segment with round caps (a capsule seen from the side, or a grid line).
fn stroke_segment(pixmap: &mut Pixmap, a: (f32, f32), b: (f32, f32), width: f32, color: Color) {
    let mut pb = PathBuilder::new();
    pb.move_to(a.0, a.1);
    // A zero-length segment (a sphere) still needs a direction for its round caps.
    pb.line_to(b.0 + 0.01, b.1);
    if let Some(path) = pb.finish() {
        let mut paint = Paint {
            anti_alias: true,
            ..Default::default()
        };
        paint.set_color(color);
        let stroke = Stroke {
            width: width.max(1.0),
            line_cap: LineCap::Round,
            ..Default::default()
        };
        pixmap.stroke_path(&path, &paint, &stroke, Transform::identity(), None);
    }
}

fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&out_dir)?;

    let mut world = World::new();
    init_cloth_resources(&mut world);
    let mut schedule = Schedule::default();
    add_cloth_systems(&mut schedule);
    let config = world.resource::<ClothConfig>().clone();

    let mut walker = CharacterRig::new(Animation::Demo, DVec3::ZERO, 0.0);
    let DemoCharacter {
        bones,
        cape: cape_entity,
    } = spawn_demo_character(&mut world, &walker, SolverSettings::default())?;
    let mut poses = Vec::new();
    let node_count = world
        .get::<ClothSim>(cape_entity)
        .ok_or("cape")?
        .cloth
        .positions()
        .len();

    let (sheet_w, sheet_h, cols, rows) = (1280u32, 720u32, 4u32, 3u32);
    let (tile_w, tile_h) = (sheet_w / cols, sheet_h / rows);
    let mut sheet = Pixmap::new(sheet_w, sheet_h).expect("nonzero size");
    let tiles = (cols * rows) as usize;
    let mut times = Vec::with_capacity(FRAMES);
    let (mut max_strain, mut mean_strain, mut max_pen) = (0.0f64, 0.0f64, 0.0f64);
    let mut iterations = 0;
    let mut rows_out = Vec::new();
    let mut phase_stats: Vec<(&str, f64, f64, f64)> = Vec::new();
    let mut written = Vec::new();
    for frame in 0..FRAMES {
        let t = frame as f64 * DT;
        walker.advance(DT);
        walker.poses(&mut poses);
        let (phase, speed) = (walker.phase_name(), walker.speed());
        for (b, &e) in bones.iter().enumerate() {
            world.get_mut::<BonePose>(e).expect("bone").0 = poses[b];
        }
        let start = Instant::now();
        schedule.run(&mut world);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        times.push(ms);
        let sim = world.get::<ClothSim>(cape_entity).expect("cape");
        if let Some(e) = &sim.last_error {
            return Err(format!("frame {frame}: {e}").into());
        }
        iterations = sim.last_step.iterations;
        let m = sim.cloth.measures();
        let colliders = world.resource::<ClothColliders>();
        let pen = colliders.set.max_penetration(
            sim.cloth.positions(),
            sim.cloth.contact_settings().thickness,
        );
        max_strain = max_strain.max(m.max_strain);
        mean_strain = mean_strain.max(m.mean_strain);
        max_pen = max_pen.max(pen);
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
            let mesh = world.get::<ClothRenderMesh>(cape_entity).expect("mesh");
            let bodies: Vec<(ColliderShape, Pose)> = (0..BONES.len())
                .filter_map(|b| CharacterRig::bone_collider(b).map(|(s, o)| (s, poses[b].mul(&o))))
                .collect();
            let target = walker.position + DVec3::new(0.0, 1.0, 0.0);
            if first_of_tile {
                let cam = Camera::following(target, walker.heading, tile_w, tile_h);
                let img = render(&cam, mesh, &bodies, walker.position, tile_w, tile_h);
                let (x, y) = ((tile as u32 % cols) * tile_w, (tile as u32 / cols) * tile_h);
                sheet.draw_pixmap(
                    x as i32,
                    y as i32,
                    img.as_ref(),
                    &tiny_skia::PixmapPaint::default(),
                    Transform::identity(),
                    None,
                );
                rows_out.push((t, phase, speed, m.max_strain, m.mean_strain, pen, ms));
            }
            if want_frame {
                let cam = Camera::following(target, walker.heading, 640, 480);
                let img = render(&cam, mesh, &bodies, walker.position, 640, 480);
                let path = out_dir.join(format!("cape_{frame:03}.png"));
                img.save_png(&path)?;
                written.push(path);
            }
        }
    }
    let sheet_path = out_dir.join("cape_contact_sheet.png");
    sheet.save_png(&sheet_path)?;

    println!(
        "isocloth cape: {} bones ({} capsules), cape of {node_count} nodes, budget {} ({} x {}), 60 Hz, {FRAMES} frames",
        BONES.len(),
        (0..BONES.len())
            .filter(|&b| CharacterRig::bone_collider(b).is_some())
            .count(),
        config.budget.name,
        config.budget.substeps,
        config.budget.iterations
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
    let (median, p99) = (percentile(&times, 0.5), percentile(&times, 0.99));
    println!();
    println!(
        "step (whole ECS tick): median {median:.3} ms, p99 {p99:.3} ms; {iterations} iterations per tick"
    );
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
        "max_strain": max_strain,
        "mean_strain": mean_strain,
        "max_penetration_m": max_pen,
        "contact_sheet": sheet_path.display().to_string(),
    });
    println!("{json}");
    Ok(())
}
