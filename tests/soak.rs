//! Short soak, run on every test run: one simulated minute of the demo cape on the procedural
//! character under random motion (walk, run, spin, idle, a 100 m teleport now and then) at the
//! default budget through the ECS layer. The long version is the `soak` example
//! (`cargo run --release --example soak -- 60`, one simulated hour).
#![cfg(feature = "ecs")]

use bevy_ecs::prelude::*;
use glam::DVec3;
use isocloth::SolverSettings;
use isocloth::ecs::{
    BonePose, ClothColliders, ClothSim, DemoCharacter, add_cloth_systems, init_cloth_resources,
    spawn_demo_character,
};
use isocloth::rig::{Animation, CharacterRig, RandomMotion};

/// One simulated minute (3,600 frames, about 15 motion changes and a 100 m teleport): no frame
/// is non-finite, no recovery is needed, no node ends a frame deeper than 0.1 mm inside a body,
/// the mean strain stays under 3 % on every frame, the max strain stays under 10 % on 99 % of
/// frames, exceeds 10 % on fewer than 60 frames (1.7 %), and never reaches 100 %.
///
/// The worst frame of a contact scene is chaotic: any change in rounding moves it. Over 16
/// motion seeds and three rounding variants of the solver (48 runs of this minute): worst frame
/// up to 59 %, 99th percentile up to 5.1 %, at most 14 frames over 10 %, worst mean strain up
/// to 1.9 %. This seed measured max strain 38 % (99th percentile 3.8 %, 11 frames over 10 %),
/// worst mean 1.6 %. Before friction was kept from stretching the cloth (`ContactPass::finish`)
/// this minute reached 148 % (99th percentile 25 %, 269 frames over 10 %), and before the
/// conformity restore and the prediction strain limit, 551 %.
#[test]
fn one_minute_of_random_motion_stays_finite_and_bounded() {
    let mut world = World::new();
    init_cloth_resources(&mut world);
    let mut schedule = Schedule::default();
    add_cloth_systems(&mut schedule);
    let mut character = CharacterRig::new(Animation::Idle, DVec3::ZERO, 0.0);
    let DemoCharacter { bones, cape } =
        spawn_demo_character(&mut world, &character, SolverSettings::default()).unwrap();
    let mut poses = Vec::new();
    let mut motion = RandomMotion::new(7);
    let (mut nan_frames, mut max_strain, mut mean_strain, mut max_pen) =
        (0, 0.0f64, 0.0f64, 0.0f64);
    let mut frame_strains = Vec::with_capacity(3600);
    for frame in 0..3600 {
        motion.drive(&mut character, frame as f64 / 60.0);
        if frame == 1800 {
            character.position += DVec3::new(100.0, 0.0, 0.0); // a teleport mid-stride
        }
        character.advance(1.0 / 60.0);
        character.poses(&mut poses);
        for (b, &e) in bones.iter().enumerate() {
            world.get_mut::<BonePose>(e).unwrap().0 = poses[b];
        }
        schedule.run(&mut world);
        let sim = world.get::<ClothSim>(cape).unwrap();
        assert!(sim.last_error.is_none(), "{:?}", sim.last_error);
        if !sim.cloth.positions().iter().all(|p| p.is_finite()) {
            nan_frames += 1;
            continue;
        }
        let m = sim.cloth.measures();
        max_strain = max_strain.max(m.max_strain);
        frame_strains.push(m.max_strain);
        mean_strain = mean_strain.max(m.mean_strain);
        let pen = world.resource::<ClothColliders>().set.max_penetration(
            sim.cloth.positions(),
            sim.cloth.contact_settings().thickness,
        );
        max_pen = max_pen.max(pen);
    }
    let recoveries = world.get::<ClothSim>(cape).unwrap().cloth.recoveries();
    frame_strains.sort_by(f64::total_cmp);
    let p99 = frame_strains[frame_strains.len() * 99 / 100];
    let over = frame_strains.iter().filter(|&&s| s > 0.1).count();
    let figures = format!(
        "max strain {max_strain:.3} (99th percentile of frames {p99:.3}, {over} frames over \
         10 %), worst mean strain {mean_strain:.4}, penetration {max_pen:.2e} m"
    );
    println!("{figures}");
    assert_eq!(nan_frames, 0, "{figures}");
    assert_eq!(recoveries, 0, "{figures}");
    assert!(max_pen < 1e-4, "{figures}");
    assert!(mean_strain < 0.03, "{figures}");
    assert!(p99 < 0.1, "{figures}");
    assert!(over < 60, "{figures}");
    assert!(max_strain < 1.0, "{figures}");
}
