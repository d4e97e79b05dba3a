//! Soak: the cape under random motion and teleports for N simulated minutes (about 7 s per simulated minute).
//!
//! Soak: a cape on the procedural character under random motion (walk, run, spin, idle, each for
//! a random 1-6 s, with random 100 m teleports now and then) at a budget preset (console by default) through the
//! ECS layer, for a given number of simulated minutes. Prints a table per simulated minute,
//! then one JSON line: `minutes`, `frames`, `nan_frames`, `recoveries`, `max_strain`,
//! `mean_strain`, `max_penetration_m`, the per-frame max strain's `max_strain_p99` and
//! `max_strain_p999`, the step's `step_ms_median`, `step_ms_p99`, `step_ms_max` and its counted
//! work `work_median`, `work_p99`, `work_max` (`isocloth::counters`), `degraded_frames`.
//!
//! Run: `cargo run --release --example soak -- 60` (one simulated hour; about 6 minutes here);
//! `-- 30 --preset mobile|console|desktop|FILE.ron` picks the budget (default console).

#[path = "common/preset_arg.rs"]
mod preset_arg;

use std::time::Instant;

use bevy_ecs::prelude::*;
use glam::DVec3;
use isocloth::counters::FrameCosts;
use isocloth::ecs::{
    BonePose, ClothColliders, ClothSim, DemoCharacter, add_cloth_systems, init_cloth_resources,
    spawn_demo_character,
};
use isocloth::ecs::{BudgetPreset, ClothConfig};
use isocloth::rig::{self, Animation, CharacterRig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut minutes = 1.0f64;
    let mut preset = BudgetPreset::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--preset" => {
                let name = args
                    .next()
                    .ok_or("--preset needs mobile|console|desktop|FILE.ron")?;
                preset = preset_arg::preset_named(&name)?;
            }
            m => minutes = m.parse().map_err(|_| format!("unknown argument `{m}`"))?,
        }
    }
    if !(minutes.is_finite() && minutes > 0.0 && minutes <= 24.0 * 60.0) {
        return Err("minutes must be in (0, 1440]".into());
    }
    let frames = (minutes * 3600.0).round() as usize;
    let config = ClothConfig {
        budget: preset.clone(),
        ..ClothConfig::default()
    };
    let settings = config.budget.settings(config.timestep, config.gravity)?;
    let mut world = World::new();
    init_cloth_resources(&mut world);
    world.insert_resource(config);
    let mut schedule = Schedule::default();
    add_cloth_systems(&mut schedule);

    let mut rig = CharacterRig::new(Animation::Idle, DVec3::ZERO, 0.0);
    let DemoCharacter { bones, cape } = spawn_demo_character(&mut world, &rig, settings)?;
    let mut poses = Vec::new();
    let mut motion = rig::RandomMotion::new(0x9E37_79B9_7F4A_7C15);
    let (mut nan_frames, mut max_strain, mut mean_strain, mut max_pen) =
        (0u64, 0.0f64, 0.0f64, 0.0f64);
    let mut pinned_max_strain = 0.0f64;
    let mut costs = FrameCosts::with_capacity(frames);
    let mut degraded_frames = 0u64;
    let mut frame_strains = Vec::with_capacity(frames);
    let mut minute = (0.0f64, 0.0f64, 0.0f64);
    println!(
        "isocloth soak: {minutes} simulated minutes ({frames} frames), preset {}",
        preset.name
    );
    println!();
    println!(
        "{:>7} {:>11} {:>12} {:>16} {:>10}",
        "minute", "max strain", "mean strain", "penetration (m)", "recoveries"
    );
    for frame in 0..frames {
        let t = frame as f64 / 60.0;
        motion.drive(&mut rig, t);
        rig.advance(1.0 / 60.0);
        rig.poses(&mut poses);
        for (b, &e) in bones.iter().enumerate() {
            world.get_mut::<BonePose>(e).ok_or("bone")?.0 = poses[b];
        }
        let start = Instant::now();
        schedule.run(&mut world);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let sim = world.get::<ClothSim>(cape).ok_or("cape")?;
        costs.record(sim.last_step.counters.work(), ms);
        degraded_frames += u64::from(sim.last_step.counters.degraded());
        if !sim.cloth.positions().iter().all(|p| p.is_finite()) {
            nan_frames += 1;
            continue;
        }
        let m = sim.cloth.measures();
        frame_strains.push(m.max_strain);
        pinned_max_strain = pinned_max_strain.max(m.pinned_max_strain);
        // Every frame (outside the timed region): a sampled maximum would miss single-frame
        // spikes that the percentiles below count.
        let pen = world.resource::<ClothColliders>().set.max_penetration(
            sim.cloth.positions(),
            sim.cloth.contact_settings().thickness,
        );
        minute.0 = minute.0.max(m.max_strain);
        minute.1 = minute.1.max(m.mean_strain);
        minute.2 = minute.2.max(pen);
        if (frame + 1) % 3600 == 0 || frame + 1 == frames {
            println!(
                "{:>7.1} {:>11.2e} {:>12.2e} {:>16.2e} {:>10}",
                (frame + 1) as f64 / 3600.0,
                minute.0,
                minute.1,
                minute.2,
                sim.cloth.recoveries()
            );
            max_strain = max_strain.max(minute.0);
            mean_strain = mean_strain.max(minute.1);
            max_pen = max_pen.max(minute.2);
            minute = (0.0, 0.0, 0.0);
        }
    }
    let recoveries = world
        .get::<ClothSim>(cape)
        .ok_or("cape")?
        .cloth
        .recoveries();
    let c = costs.summary();
    frame_strains.sort_by(f64::total_cmp);
    let over = |limit: f64| frame_strains.iter().filter(|&&s| s > limit).count();
    let quantile = |q: f64| frame_strains[((frame_strains.len() - 1) as f64 * q) as usize];
    let json = serde_json::json!({
        "minutes": minutes,
        "preset": preset.name,
        "frames": frames,
        "nan_frames": nan_frames,
        "recoveries": recoveries,
        "max_strain": max_strain,
        "pinned_max_strain": pinned_max_strain,
        "mean_strain": mean_strain,
        "max_penetration_m": max_pen,
        "max_strain_p99": quantile(0.99),
        "max_strain_p999": quantile(0.999),
        "frames_over_10pct_strain": over(0.1),
        "frames_over_1pct_strain": over(0.01),
        "step_ms_median": c.step_ms_median,
        "step_ms_p99": c.step_ms_p99,
        "step_ms_max": c.step_ms_max,
        "work_median": c.work_median,
        "work_p99": c.work_p99,
        "work_max": c.work_max,
        "degraded_frames": degraded_frames,
    });
    println!("{json}");
    Ok(())
}
