//! A crowd: 64 caped characters walk across a plaza past a camera, all their cloth within one
//! frame budget shared by level of detail (about 40 s).
//!
//! ```sh
//! cargo run --release --example crowd -- [--budget MS] [--seconds S] [--characters N]
//!     [--every N] [--threads T] [--seed N] [--rung SxI] [--ladder SxI,...]
//! ```
//!
//! Every character is the procedural walker of `isocloth::rig` with the demo cape (777 nodes,
//! all capes sharing one `ClothModel`), stepped through the bevy_ecs layer with a `ClothLod`
//! resource: a 4 ms cloth budget (wall-clock time of the cloth step, every cape together) on
//! two threads (`--threads`; the scheduler plans `budget x threads` of summed cape time), the
//! ladder console (2 x 5), mobile (1 x 5), half rate (2 x 3 over two ticks), all of the
//! accelerated local-global map, then follow the skin (no sleep: a walker's cape left behind would jump when it
//! woke). Priorities are the
//! capes' distance to the camera. The crowd walks toward the camera; every second the
//! character nearest it leaves and a new one arrives at the plaza's far end (its cape a new
//! `Cloth` of the shared model, draped as the template settled). `--seed` (default 7) places
//! the crowd and the arrivals otherwise (another plaza of the same kind). `--rung SxI` runs
//! every cape at one simulated rung (S substeps x I iterations of the accelerated map), every
//! tick, without level of detail: what that rung gives the crowd, at whatever it costs.
//! `--ladder SxI,SxI,...` replaces the ladder by one to three simulated rungs, then follow the
//! skin (for example `--ladder 2x5,1x5`: console and mobile, no half rate).
//!
//! Prints, every `--every` frames (default 1: every frame), the cloth time, each rung's
//! count, the max strain of the eight capes nearest the camera and resident memory; writes the plaza from the
//! camera with capes tinted by rung (`target/isocloth/crowd.png`: green console, blue mobile,
//! orange half rate, grey follow-skin) and the cloth time against the budget over the run with
//! the number of rung changes each frame (`target/isocloth/crowd_time.png`); ends with one JSON line: `frame_ms_p50`,
//! `frame_ms_p99` (the cloth step's wall-clock time a frame, after the first second;
//! `step_ms_p99` the same figure under the name the tick's split uses, with `step_ms_median`
//! and `step_ms_max`; `work_median`, `work_p99`, `work_max` the step's counted work a tick,
//! summed over the capes, `isocloth::counters`), `tick_cpu_ms_p99` (the tick's CPU time summed
//! over the process's threads, null where the platform does not give it),
//! `tick_ms_p50`, `tick_ms_p99` (the whole cloth schedule's: bones, attachments, plan, step,
//! render meshes), `other_ms_p50`, `other_ms_p99` (the tick less the step), `culled_mean`
//! (capes outside the camera's view a frame, mean: the example culls them as a game does,
//! `ClothDrawn(false)`, so they get no render mesh),
//! `summed_ms_p50` (the capes' step times summed), `budget_ms`,
//! `nearest4_max_strain`, `nearest4_nodes_inside_body` (the four capes nearest the camera),
//! `near_max_strain`, `near_pinned_max_strain`, `near_nodes_inside_body` (the eight nearest;
//! nodes inside checked every tenth frame against each character's own bodies), `bodies_per_cape_mean` (bodies a cape's
//! collision groups let its broad phase see, mean over capes and checked frames: each
//! character and its cape share one of 32 groups), `rung_changes`, `min_change_interval_s` (the shortest time
//! between two rung changes of one cape), `min_change_interval_near8_s` (the same between two
//! changes both made while the cape was among the eight nearest the camera: a far cape giving
//! way, then coming near, is left out), `memory_bytes_start` (resident memory after 10 s),
//! `memory_bytes_minute` (after 60 s; the soak's reference, 0 in a shorter run),
//! `memory_bytes_end`.

#[path = "common/cape_scene.rs"]
#[allow(dead_code)]
mod cape_scene;
#[path = "common/cpu_time.rs"]
mod cpu_time;
#[path = "common/plot.rs"]
#[allow(dead_code)]
mod plot;
#[path = "common/render.rs"]
#[allow(dead_code)]
mod render;

use std::collections::HashMap;
use std::path::PathBuf;

use bevy_ecs::prelude::*;
use glam::{DQuat, DVec3, Vec3};
use isocloth::counters::FrameCosts;
use isocloth::ecs::{
    BonePose, ClothColliders, ClothCollisionGroups, ClothConfig, ClothDrawn, ClothLod,
    ClothRenderMesh, ClothSim, ClothTickCounters, DemoCharacter, add_cloth_systems,
    init_cloth_resources, spawn_character_with_cape,
};
use isocloth::lod::{ClothBudget, Rung};
use isocloth::rig::{self, Animation, CharacterRig};
use isocloth::{Cloth, ColliderSet, ColliderShape, CollisionGroups, Pose, SolverMethod};
use serde_json::json;

const DT: f64 = 1.0 / 60.0;
/// Where characters arrive (x, the plaza's far end), where the crowd ends (x) and the half
/// width of the plaza (z).
const START_X: f64 = 18.0;
const END_X: f64 = -12.0;
const HALF_WIDTH: f64 = 8.0;
/// The camera: at the plaza's near end, looking along it.
const EYE: DVec3 = DVec3::new(-18.0, 2.2, 0.0);
/// Where the camera looks, and its vertical field of view (radians) for a 16:9 picture.
const LOOK_AT: DVec3 = DVec3::new(0.0, 0.8, 0.0);
const FOV_Y: f64 = 0.9;
/// A cape's bounding sphere about its centre of mass (m): the 0.9 m cape and its sway.
const CAPE_RADIUS: f64 = 1.0;
const NEAR: usize = 8;
/// The nearest capes, judged on the tighter bound.
const NEAREST: usize = 4;

struct Args {
    budget_ms: f64,
    seconds: f64,
    characters: usize,
    every: usize,
    threads: usize,
    seed: u64,
    /// `--ladder SxI,...` (one to three simulated rungs, then follow the skin: `true`) or
    /// `--rung SxI` (every cape at that rung: `false`) in place of the default ladder.
    ladder: Option<(Vec<(u32, u32)>, bool)>,
}

/// `S` x `I` from `SxI` (both at least 1).
fn rung_arg(text: &str) -> Option<(u32, u32)> {
    let (s, i) = text.split_once('x')?;
    let (s, i) = (s.parse().ok()?, i.parse().ok()?);
    (s >= 1 && i >= 1 && s <= 16 && i <= 64).then_some((s, i))
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        budget_ms: 4.0,
        seconds: 60.0,
        characters: 64,
        every: 1,
        threads: 2,
        seed: 7,
        ladder: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--rung" || flag == "--ladder" {
            let (most, skin, what) = if flag == "--rung" {
                (1, false, "one SxI rung")
            } else {
                (3, true, "1 to 3 SxI rungs separated by commas")
            };
            let text = it.next().unwrap_or_default();
            let rungs: Option<Vec<(u32, u32)>> = text.split(',').map(rung_arg).collect();
            let rungs = rungs
                .filter(|r| (1..=most).contains(&r.len()))
                .ok_or(format!(
                    "{flag} takes {what} (substeps x iterations, 1-16 x 1-64), got {text:?}"
                ))?;
            a.ladder = Some((rungs, skin));
            continue;
        }
        if flag == "--seed" {
            let text = it.next().unwrap_or_default();
            a.seed = text
                .parse()
                .map_err(|_| format!("--seed takes a whole number, got {text:?}"))?;
            continue;
        }
        let value = it
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or(format!("{flag} takes a positive number"))?;
        match flag.as_str() {
            "--budget" => a.budget_ms = value,
            "--seconds" => a.seconds = value,
            "--characters" => a.characters = (value as usize).clamp(1, 1024),
            "--every" => a.every = (value as usize).max(1),
            "--threads" => a.threads = (value as usize).clamp(1, 64),
            other => {
                return Err(format!(
                    "unknown option {other:?} (--budget MS --seconds S --characters N --every N --threads T --seed N --rung SxI --ladder SxI,...)"
                ));
            }
        }
    }
    Ok(a)
}

/// One walker: its animation, bone entities, cape entity and its own bodies (for the
/// `nodes_inside_body` check).
struct Walker {
    rig: CharacterRig,
    bones: Vec<Entity>,
    cape: Entity,
    bodies: ColliderSet,
    body_bones: BodyBones,
}

/// A walker at `position` heading along -x (toward the camera), with a cape of `template`'s
/// model.
fn spawn(
    world: &mut World,
    template: &Cloth,
    position: DVec3,
    walked: f64,
    group: u32,
) -> Result<Walker, Box<dyn std::error::Error>> {
    let heading = -std::f64::consts::FRAC_PI_2;
    let mut walker = CharacterRig::new(Animation::Walk, position, heading);
    // Mid-stride, as if it had been walking (its first half second ramps up its speed).
    walker.advance(walked);
    // Every cape arrives draped as the template settled (a game spawns capes pre-draped).
    let mut cloth = Cloth::new(template.model().clone());
    cloth.set_positions(template.positions())?;
    cloth.teleport(&Pose::new(
        walker.position,
        DQuat::from_rotation_y(walker.heading),
    ))?;
    let DemoCharacter { bones, cape } = spawn_character_with_cape(world, &walker, cloth)?;
    // Collision groups: the cape and its character's bodies share one group (of 32, given in
    // turn as characters arrive, so that two of one group are far apart on the plaza) and
    // meet only it: a cape's broad phase sees its own character, not the crowd's.
    let groups = ClothCollisionGroups(CollisionGroups::from_lists(&[group], &[group])?);
    world.entity_mut(cape).insert(groups);
    for &b in &bones {
        world.entity_mut(b).insert(groups);
    }
    let (bodies, body_bones) = character_bodies(&walker)?;
    Ok(Walker {
        rig: walker,
        bones,
        cape,
        bodies,
        body_bones,
    })
}

/// Per body of a character, its bone and the body's offset from it.
type BodyBones = Vec<(usize, Pose)>;

/// The character's bodies at its current pose, as the crowd checks its cape against them,
/// and per body its bone and offset (to move them with the bones).
fn character_bodies(
    character: &CharacterRig,
) -> Result<(ColliderSet, BodyBones), Box<dyn std::error::Error>> {
    let mut poses = Vec::new();
    character.poses(&mut poses);
    let mut bodies = ColliderSet::new();
    let mut body_bones = Vec::new();
    for (b, pose) in poses.iter().enumerate() {
        if let Some((shape, offset)) = CharacterRig::bone_collider(b) {
            bodies.add(shape, pose.mul(&offset))?;
            body_bones.push((b, offset));
        }
    }
    Ok((bodies, body_bones))
}

/// Lets the template cape hang from a standing character for two seconds, so that capes
/// arrive draped instead of as the flat sheet they were cut from.
fn settle(template: &mut Cloth) -> Result<(), Box<dyn std::error::Error>> {
    let standing = CharacterRig::new(Animation::Idle, DVec3::ZERO, 0.0);
    let (bodies, _) = character_bodies(&standing)?;
    for _ in 0..120 {
        template.step_with(DT, &bodies)?;
    }
    Ok(())
}

/// Whether a sphere at `center` of `radius` is inside the camera's view (its four side
/// planes): a cape outside it is culled, as a game culls what it does not draw
/// ([`ClothDrawn`]).
fn in_view(center: DVec3, radius: f64) -> bool {
    let forward = (LOOK_AT - EYE).normalize();
    let right = forward.cross(DVec3::Y).normalize();
    let up = right.cross(forward);
    let d = center - EYE;
    let z = d.dot(forward);
    let (ty, tx) = ((0.5 * FOV_Y).tan(), (0.5 * FOV_Y).tan() * 16.0 / 9.0);
    // Distance past each side plane (positive outside), the planes through the eye.
    let side = |t: f64, lateral: f64| (lateral.abs() - t * z) / (1.0 + t * t).sqrt();
    z > -radius && side(tx, d.dot(right)) < radius && side(ty, d.dot(up)) < radius
}

/// Resident memory of this process in bytes (Linux; 0 elsewhere).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// A small deterministic generator in [0, 1).
fn unit(seed: &mut u64) -> f64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 11) as f64 / (1u64 << 53) as f64
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build_global()?;

    // The default ladder without desktop (too dear for a crowd) and sleep (see the docs).
    let ladder = ClothBudget::default().ladder;
    let simulate = |&(substeps, iterations): &(u32, u32)| Rung::Simulate {
        substeps,
        iterations,
        method: SolverMethod::Anderson { history: 5 },
    };
    let label = |&(s, i): &(u32, u32)| format!("{s}x{i}");
    let (ladder, rung_names): (Vec<Rung>, Vec<String>) = match &args.ladder {
        // `--rung`: one simulated rung, every cape at it every tick (what it gives the crowd).
        Some((rungs, skin)) => (
            rungs
                .iter()
                .map(simulate)
                .chain(skin.then_some(Rung::FollowSkin))
                .collect(),
            rungs
                .iter()
                .map(label)
                .chain(skin.then(|| "skin".to_string()))
                .collect(),
        ),
        None => (
            ladder[1..5].to_vec(),
            ["console", "mobile", "half", "skin"]
                .map(String::from)
                .to_vec(),
        ),
    };
    let budget = ClothBudget {
        frame_ms: args.budget_ms,
        parallelism: args.threads as f64,
        ladder,
        ..Default::default()
    };
    let tints = [
        (60.0, 170.0, 80.0),
        (60.0, 110.0, 200.0),
        (230.0, 140.0, 40.0),
        (150.0, 150.0, 150.0),
    ];
    let config = ClothConfig::default();
    let mut template = rig::demo_cape(config.budget.settings(config.timestep, config.gravity)?)?;
    settle(&mut template)?;
    let mut world = World::new();
    world.insert_resource(config);
    init_cloth_resources(&mut world);
    let mut lod = ClothLod::new(budget)?;
    lod.viewer = EYE;
    world.insert_resource(lod);
    let mut schedule = Schedule::default();
    add_cloth_systems(&mut schedule);

    let mut seed = args.seed;
    let mut walkers: Vec<Walker> = Vec::new();
    for k in 0..args.characters {
        // Spread along the plaza, as a crowd already under way.
        let x = END_X + (START_X - END_X) * k as f64 / args.characters as f64;
        let z = HALF_WIDTH * (2.0 * unit(&mut seed) - 1.0);
        walkers.push(spawn(
            &mut world,
            &template,
            DVec3::new(x, 0.0, z),
            0.5 + unit(&mut seed),
            k as u32 % 32 + 1,
        )?);
    }
    println!(
        "isocloth crowd: {} characters, {} ms cloth budget, {} threads, {} s",
        args.characters, args.budget_ms, args.threads, args.seconds
    );
    println!(
        "{:>6} {:>9} {:>8} {:>7} {:>7} {:>6} {:>14} {:>10}",
        "frame",
        "cloth ms",
        rung_names.first().map_or("", String::as_str),
        rung_names.get(1).map_or("", String::as_str),
        rung_names.get(2).map_or("", String::as_str),
        rung_names.get(3).map_or("", String::as_str),
        "near max strain",
        "memory MB"
    );
    let frames = (args.seconds / DT).round() as usize;
    let mut poses = Vec::new();
    // The per-frame logs are written through once before the run, so that their pages are
    // resident from the start: the memory figures are the crowd's, not this log's (36,000
    // frames of two logs are 0.6 MB, 2 % of the process).
    let mut totals = vec![f64::NAN; frames];
    let mut summed = vec![f64::NAN; frames];
    totals.clear();
    summed.clear();
    let mut near_max_strain = 0.0f64;
    let mut near_pinned_max_strain = 0.0f64;
    let mut near_inside = 0usize;
    let (mut nearest4_max_strain, mut nearest4_inside) = (0.0f64, 0usize);
    // The whole cloth schedule's wall time a frame (gather, attachments, plan, step, meshes).
    let mut ticks = vec![f64::NAN; frames];
    ticks.clear();
    // The tick's CPU time, summed over the process's threads (ms), and the step's counted
    // work with its wall time (after the first second).
    let mut tick_cpu: Vec<f64> = Vec::with_capacity(frames);
    let mut costs = FrameCosts::with_capacity(frames);
    // The tick's work outside the step (gather, attachments, plan, render meshes) a frame.
    let mut others = vec![f64::NAN; frames];
    others.clear();
    // Capes culled (outside the camera's view) a frame, summed.
    let mut culled_total = 0usize;
    // The shortest time between two rung changes of a cape among the eight nearest.
    let mut min_interval_near = f64::INFINITY;
    // Rung changes a frame (every cape), for the time plot; kept written through, as the logs.
    let mut changes = vec![0usize; frames];
    changes.clear();
    // Bodies each cape's groups let its broad phase see, summed over the checked frames.
    let mut bodies_seen = (0usize, 0usize);
    let mut last_rung: HashMap<Entity, (usize, f64)> = HashMap::new();
    // Per cape, when it last changed rung among the eight nearest (none: its last change was
    // made farther away, a far cape giving way).
    let mut last_near_change: HashMap<Entity, f64> = HashMap::new();
    let mut min_interval = f64::INFINITY;
    let (mut memory_start, mut memory_minute, mut arrivals) = (0u64, 0u64, 0usize);
    for frame in 0..frames {
        let now = frame as f64 * DT;
        // Churn: every second the one farthest along (nearest the camera) leaves and a new one
        // arrives at the far end.
        if frame > 0 && frame % 60 == 0 {
            let (k, _) = walkers
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.rig.position.x.total_cmp(&b.1.rig.position.x))
                .ok_or("no walkers")?;
            let gone = walkers.swap_remove(k);
            world.despawn(gone.cape);
            for b in gone.bones {
                world.despawn(b);
            }
            last_rung.remove(&gone.cape);
            last_near_change.remove(&gone.cape);
            let z = HALF_WIDTH * (2.0 * unit(&mut seed) - 1.0);
            walkers.push(spawn(
                &mut world,
                &template,
                DVec3::new(START_X, 0.0, z),
                0.5,
                (args.characters + arrivals) as u32 % 32 + 1,
            )?);
            arrivals += 1;
        }
        let check = frame % 10 == 0;
        for w in &mut walkers {
            w.rig.advance(DT);
            w.rig.poses(&mut poses);
            for (b, &e) in w.bones.iter().enumerate() {
                if let Some(mut p) = world.get_mut::<BonePose>(e) {
                    p.0 = poses[b];
                }
            }
            if check {
                w.bodies.finish_frame();
                for (id, &(b, offset)) in w.body_bones.iter().enumerate() {
                    w.bodies.set_pose(id, poses[b].mul(&offset))?;
                }
            }
        }
        // The game culls the capes it does not draw (from last tick's place, as a game does).
        for w in &walkers {
            let center = world
                .get::<ClothSim>(w.cape)
                .ok_or("cape missing")?
                .cloth
                .center_of_mass();
            let drawn = in_view(center, CAPE_RADIUS);
            culled_total += usize::from(!drawn);
            match world.get_mut::<ClothDrawn>(w.cape) {
                Some(mut d) => d.0 = drawn,
                None => {
                    world.entity_mut(w.cape).insert(ClothDrawn(drawn));
                }
            }
        }
        let cpu_start = cpu_time::process_cpu_ms();
        let tick_start = std::time::Instant::now();
        schedule.run(&mut world);
        let tick_ms = tick_start.elapsed().as_secs_f64() * 1e3;
        if let (Some(a), Some(b)) = (cpu_start, cpu_time::process_cpu_ms()) {
            tick_cpu.push(b - a);
        }
        ticks.push(tick_ms);
        others.push(tick_ms - world.resource::<ClothLod>().last_wall_ms());
        // What a Bevy `App` does after every update: without it a bare `World` keeps every
        // despawned component's removal event (the churn's capes and bones), 0.1-0.2 MB a
        // minute here.
        world.clear_trackers();
        if check {
            let set = &world.resource::<ClothColliders>().set;
            for w in &walkers {
                let sim = world.get::<ClothSim>(w.cape).ok_or("cape missing")?;
                bodies_seen.0 += set.count_meeting(sim.cloth.contact_settings().groups);
                bodies_seen.1 += 1;
            }
        }
        let lod = world.resource::<ClothLod>();
        let total = lod.last_wall_ms();
        totals.push(total);
        if frame >= 60 {
            costs.record(world.resource::<ClothTickCounters>().work(), total);
        }
        changes.push(0);
        summed.push(lod.last_total_ms());
        let mut counts = [0usize; 4];
        let mut by_distance: Vec<(f64, usize)> = Vec::with_capacity(walkers.len());
        let mut changed_now = 0usize;
        // Per walker, whether it changed rung this frame.
        let mut changed = vec![false; walkers.len()];
        for (k, w) in walkers.iter().enumerate() {
            let rung = lod.rung_of(w.cape).unwrap_or(3);
            counts[rung.min(3)] += 1;
            match last_rung.get(&w.cape) {
                Some(&(r, at)) if r != rung => {
                    min_interval = min_interval.min(now - at);
                    changed[k] = true;
                    last_rung.insert(w.cape, (rung, now));
                    changed_now += 1;
                }
                None => {
                    last_rung.insert(w.cape, (rung, f64::NEG_INFINITY));
                }
                _ => {}
            }
            let sim = world.get::<ClothSim>(w.cape).ok_or("cape missing")?;
            by_distance.push((sim.cloth.center_of_mass().distance(EYE), k));
        }
        if let Some(c) = changes.last_mut() {
            *c = changed_now;
        }
        by_distance.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut near_strain, mut near_pinned, mut nearest_strain) = (0.0f64, 0.0f64, 0.0f64);
        // The dwell of the eight nearest: two changes of a cape, both made among them.
        for (rank, &(_, k)) in by_distance.iter().enumerate() {
            if !changed[k] {
                continue;
            }
            let cape = walkers[k].cape;
            if rank < NEAR {
                if let Some(at) = last_near_change.insert(cape, now) {
                    min_interval_near = min_interval_near.min(now - at);
                }
            } else {
                last_near_change.remove(&cape);
            }
        }
        for (rank, &(_, k)) in by_distance.iter().take(NEAR).enumerate() {
            let sim = world
                .get::<ClothSim>(walkers[k].cape)
                .ok_or("cape missing")?;
            let m = sim.cloth.measures();
            near_strain = near_strain.max(m.max_strain);
            near_pinned = near_pinned.max(m.pinned_max_strain);
            if rank < NEAREST {
                nearest_strain = nearest_strain.max(m.max_strain);
            }
            if check {
                let inside = cape_scene::nodes_inside(&walkers[k].bodies, sim.cloth.positions());
                near_inside = near_inside.max(inside);
                if rank < NEAREST {
                    nearest4_inside = nearest4_inside.max(inside);
                }
            }
        }
        // The first second settles the capes from their rest pose (and learns the costs).
        if frame >= 60 {
            near_max_strain = near_max_strain.max(near_strain);
            near_pinned_max_strain = near_pinned_max_strain.max(near_pinned);
            nearest4_max_strain = nearest4_max_strain.max(nearest_strain);
        }
        if frame + 1 == 600 {
            memory_start = resident_bytes();
        }
        if frame + 1 == 3600 {
            memory_minute = resident_bytes();
        }
        if frame % args.every == 0 {
            println!(
                "{:>6} {:>9.3} {:>8} {:>7} {:>7} {:>6} {:>13.2}% {:>10.2}",
                frame,
                total,
                counts[0],
                counts[1],
                counts[2],
                counts[3],
                100.0 * near_strain,
                resident_bytes() as f64 / 1e6
            );
        }
    }
    let memory_end = resident_bytes();
    let lod = world.resource::<ClothLod>();
    let rung_changes = lod.scheduler.changes();

    // The plaza from the camera, capes tinted by rung.
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&out)?;
    let (width, height) = (960u32, 540u32);
    let cam = render::Camera::look_at(EYE, LOOK_AT, FOV_Y, width, height);
    let mut meshes: Vec<(Vec<Vec3>, Vec<u32>, usize)> = Vec::new();
    let mut bodies: Vec<(ColliderShape, Pose)> = Vec::new();
    for w in &walkers {
        let mesh = world
            .get::<ClothRenderMesh>(w.cape)
            .ok_or("render mesh missing")?;
        let rung = lod.rung_of(w.cape).unwrap_or(3).min(3);
        meshes.push((mesh.positions.clone(), mesh.indices.clone(), rung));
        w.rig.poses(&mut poses);
        for &(b, offset) in &w.body_bones {
            if let Some((shape, _)) = CharacterRig::bone_collider(b) {
                bodies.push((shape, poses[b].mul(&offset)));
            }
        }
    }
    let draws: Vec<render::ClothDraw<'_>> = meshes
        .iter()
        .map(|(p, i, r)| render::ClothDraw {
            positions: p,
            indices: i,
            tint: Some(tints[*r]),
        })
        .collect();
    let style = render::Style {
        ground: Some(render::Grid {
            height: 0.0,
            center: DVec3::new(0.0, 0.0, 0.0),
            spacing: 1.0,
            lines: 20,
        }),
        body_outlines: false,
        far_body_depth: false,
    };
    let picture = render::render_cloths(&cam, &draws, None, &bodies, &style, width, height);
    let picture_path = out.join("crowd.png");
    picture.save_png(&picture_path)?;
    let plot_path = out.join("crowd_time");
    plot::linear_panel(
        &plot_path,
        &plot::Panel {
            title: format!(
                "{} capes on {} threads: cloth time and rung changes a frame",
                args.characters, args.threads
            ),
            x_label: "time (s)".into(),
            y_label: "cloth time (ms)".into(),
            series: vec![
                plot::Series {
                    label: "cloth time".into(),
                    points: totals
                        .iter()
                        .enumerate()
                        .map(|(f, &t)| (f as f64 * DT, t))
                        .collect(),
                },
                plot::Series {
                    label: "rung changes that frame (count, same axis)".into(),
                    points: changes
                        .iter()
                        .enumerate()
                        .map(|(f, &c)| (f as f64 * DT, c as f64))
                        .collect(),
                },
            ],
            target: Some((args.budget_ms, format!("budget {} ms", args.budget_ms))),
            v_line: None,
            lines: true,
            mark: None,
        },
    )?;

    let mut whole: Vec<f64> = ticks.iter().skip(60).copied().collect();
    whole.sort_by(f64::total_cmp);
    let mut cpu: Vec<f64> = tick_cpu.iter().skip(60).copied().collect();
    cpu.sort_by(f64::total_cmp);
    let tick_cpu_p99 = (!cpu.is_empty()).then(|| percentile(&cpu, 0.99));
    let cost = costs.summary();
    let mut other: Vec<f64> = others.iter().skip(60).copied().collect();
    other.sort_by(f64::total_cmp);
    let culled_mean = culled_total as f64 / frames.max(1) as f64;
    let mut settled: Vec<f64> = totals.iter().skip(60).copied().collect();
    settled.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&settled, 0.5), percentile(&settled, 0.99));
    let mut summed: Vec<f64> = summed.iter().skip(60).copied().collect();
    summed.sort_by(f64::total_cmp);
    let summed_p50 = percentile(&summed, 0.5);
    println!();
    println!("{:<30} {:>12}", "figure", "value");
    println!("{:<30} {:>12.3}", "cloth ms p50", p50);
    println!("{:<30} {:>12.3}", "cloth ms p99", p99);
    println!("{:<30} {:>12.3}", "tick ms p50", percentile(&whole, 0.5));
    println!("{:<30} {:>12.3}", "tick ms p99", percentile(&whole, 0.99));
    if let Some(c) = tick_cpu_p99 {
        println!("{:<30} {:>12.3}", "tick CPU ms p99", c);
    }
    println!("{:<30} {:>12.0}", "work median", cost.work_median);
    println!("{:<30} {:>12.0}", "work p99", cost.work_p99);
    println!("{:<30} {:>12.0}", "work max", cost.work_max);
    println!("{:<30} {:>12.3}", "other ms p50", percentile(&other, 0.5));
    println!("{:<30} {:>12.3}", "other ms p99", percentile(&other, 0.99));
    println!("{:<30} {:>12.2}", "capes culled (mean)", culled_mean);
    println!("{:<30} {:>12.3}", "summed ms p50", summed_p50);
    println!("{:<30} {:>12.3}", "budget ms", args.budget_ms);
    println!(
        "{:<30} {:>11.2}%",
        "nearest 4 max strain",
        100.0 * nearest4_max_strain
    );
    println!(
        "{:<30} {:>12}",
        "nearest 4 nodes inside a body", nearest4_inside
    );
    println!(
        "{:<30} {:>11.2}%",
        "near (8) max strain",
        100.0 * near_max_strain
    );
    println!("{:<30} {:>12}", "near (8) nodes inside a body", near_inside);
    println!("{:<30} {:>12}", "rung changes", rung_changes);
    println!("{:<30} {:>12.3}", "min change interval (s)", min_interval);
    println!(
        "{:<30} {:>12.3}",
        "min change interval near 8 (s)", min_interval_near
    );
    println!("{:<30} {:>12}", "arrivals", arrivals);
    println!("{:<30} {:>12}", "memory after 10 s (bytes)", memory_start);
    println!("{:<30} {:>12}", "memory after 60 s (bytes)", memory_minute);
    println!("{:<30} {:>12}", "memory at the end (bytes)", memory_end);
    println!("picture: {}", picture_path.display());
    println!("plot: {}", plot_path.with_extension("png").display());
    println!(
        "{}",
        json!({
            "example": "crowd",
            "characters": args.characters,
            "seconds": args.seconds,
            "budget_ms": args.budget_ms,
            "frame_ms_p50": p50,
            "frame_ms_p99": p99,
            "tick_ms_p50": percentile(&whole, 0.5),
            "tick_ms_p99": percentile(&whole, 0.99),
            "tick_cpu_ms_p99": tick_cpu_p99,
            "step_ms_median": cost.step_ms_median,
            "step_ms_p99": p99,
            "step_ms_max": cost.step_ms_max,
            "work_median": cost.work_median,
            "work_p99": cost.work_p99,
            "work_max": cost.work_max,
            "other_ms_p50": percentile(&other, 0.5),
            "other_ms_p99": percentile(&other, 0.99),
            "culled_mean": culled_mean,
            "summed_ms_p50": summed_p50,
            "threads": args.threads,
            "nearest4_max_strain": nearest4_max_strain,
            "nearest4_nodes_inside_body": nearest4_inside,
            "near_max_strain": near_max_strain,
            "near_pinned_max_strain": near_pinned_max_strain,
            "near_nodes_inside_body": near_inside,
            "bodies_per_cape_mean": bodies_seen.0 as f64 / bodies_seen.1.max(1) as f64,
            "rung_changes": rung_changes,
            "min_change_interval_s": if min_interval.is_finite() { min_interval } else { -1.0 },
            "min_change_interval_near8_s": if min_interval_near.is_finite() { min_interval_near } else { -1.0 },
            "rungs": rung_names,
            "memory_bytes_start": memory_start,
            "memory_bytes_minute": memory_minute,
            "memory_bytes_end": memory_end,
            "picture": picture_path.display().to_string(),
            "plot": plot_path.with_extension("png").display().to_string(),
        })
    );
    Ok(())
}
