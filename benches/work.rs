//! How well the counted work (`isocloth::StepCounters::work`) tracks time: 30 frames of scenes
//! whose work is made of different stages, each timed and divided by its work. A work count
//! that tracks time gives every scene about the same nanoseconds per unit.
//!
//! * `work/hanging_sheet_cap_off`: the 45 x 45-node sheet hanging, strain cap off: solves and
//!   local steps only (the reference: work that never varies);
//! * `work/cape_walk`, `work/cape_run`: the demo cape (777 nodes) on the walking and running
//!   character, its 13 bodies on (contact);
//! * `work/whipped_cape`: a 0.5 x 0.9 m cape whose pins are jerked 15 cm a frame (the strain
//!   cap's steps).
//!
//! After criterion's figures it prints each scene's work per frame and nanoseconds per unit of
//! work (the median of 15 timings of the 30 frames). Run: `cargo bench --bench work`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

mod common;

use common::Walk;
use glam::{DVec3, Vec3};
use isocloth::rig::Animation;
use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverSettings, StrainCap};

const DT: f64 = 1.0 / 60.0;

/// A scene: 30 frames from the same start every call, returning their work.
type Frames = Box<dyn FnMut() -> f64>;

fn sheet() -> Frames {
    let (mesh, pins) = common::hanging_sheet(22);
    let settings = SolverSettings {
        strain_cap: StrainCap::OFF,
        ..Default::default()
    };
    let mut cloth =
        Cloth::from_mesh((*mesh).clone(), Material::default(), &pins, settings).expect("sheet");
    for _ in 0..30 {
        cloth.step(DT).expect("step");
    }
    let snapshot = cloth.snapshot();
    Box::new(move || {
        cloth.restore(&snapshot).expect("restore");
        (0..30)
            .map(|_| black_box(cloth.step(DT).expect("step")).counters.work())
            .sum()
    })
}

fn walk(animation: Animation) -> Frames {
    let walk = Walk::new(animation, 60, |_| {});
    let work = walk.thirty_frames_work();
    let mut frames = walk.thirty_frames();
    Box::new(move || {
        frames();
        work
    })
}

fn whipped() -> Frames {
    let (w, h, cx, cy) = (0.5f32, 0.9f32, 10, 18);
    let base = BaseMesh::rectangle(w, h, cx, cy)
        .expect("rectangle")
        .map_positions(|p| Vec3::new(p.x - 0.5 * w, 1.5 - h + p.y, 0.0));
    let mesh = ClothMesh::new(&base).expect("mesh");
    let top: Vec<u32> = (0..=cx).map(|i| BaseMesh::grid_index(cx, i, cy)).collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default())
        .expect("cape");
    let start: Vec<DVec3> = cloth
        .pins()
        .iter()
        .map(|&p| cloth.positions()[p as usize])
        .collect();
    let snapshot = cloth.snapshot();
    let mut targets = start.clone();
    Box::new(move || {
        cloth.restore(&snapshot).expect("restore");
        let mut work = 0.0;
        for frame in 0..30 {
            let t = (frame + 1) as f64 * DT;
            let jerk = if (frame / 15) % 2 == 0 { 0.0 } else { 0.15 };
            let shift = DVec3::new(0.3 * (std::f64::consts::TAU * 3.0 * t).sin(), jerk, 0.2 * t);
            for (t, &p) in targets.iter_mut().zip(&start) {
                *t = p + shift;
            }
            cloth.set_pin_targets(&targets).expect("pins");
            work += black_box(cloth.step(DT).expect("step")).counters.work();
        }
        work
    })
}

fn bench_work(c: &mut Criterion) {
    let scenes: Vec<(&str, Frames)> = vec![
        ("hanging_sheet_cap_off", sheet()),
        ("cape_walk", walk(Animation::Walk)),
        ("cape_run", walk(Animation::Run)),
        ("whipped_cape", whipped()),
    ];
    let mut group = c.benchmark_group("work");
    group
        .sample_size(15)
        .measurement_time(Duration::from_secs(5));
    let mut rows = Vec::new();
    for (name, mut frames) in scenes {
        group.bench_function(name, |b| b.iter(&mut frames));
        let mut times: Vec<f64> = (0..15)
            .map(|_| {
                let start = Instant::now();
                frames();
                start.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let work = frames();
        rows.push((name, work / 30.0, times[7] * 1e9 / work));
    }
    group.finish();
    println!(
        "\n{:<24} {:>14} {:>14}",
        "scene", "work a frame", "ns per unit"
    );
    for (name, work, ns) in rows {
        println!("{name:<24} {work:>14.0} {ns:>14.2}");
    }
}

criterion_group!(benches, bench_work);
criterion_main!(benches);
