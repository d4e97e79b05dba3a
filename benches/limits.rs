//! Cost of the game constraints and of sleeping on a frame.
//!
//! * `limits/cape_777_nodes/{none,tethers,max_distance,backstop,all_three}`: 30 frames (1/60 s
//!   each) of the demo cape (777 nodes, default budget) on the procedural character walking,
//!   its 13 bodies on, with no game constraint, each alone (`rig::demo_cape_limits`' painting,
//!   tethers of scale 1.05) and all three; the same 30 frames every iteration (restored from a
//!   snapshot taken 1 s into the walk). Divide by 30 for a frame.
//! * `limits/hanging_cape/{awake,asleep}`: a still hanging cape (0.5 x 0.8 m, 8 x 8 cells),
//!   sleep on: a frame of it awake (the stillness clock reset every frame) and asleep.
//!
//! Run: `cargo bench --bench limits`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

mod common;

use common::Walk;
use glam::Vec3;
use isocloth::rig::{self, Animation};
use isocloth::{
    BaseMesh, Cloth, ClothMesh, LimitSettings, Material, SleepSettings, SolverSettings,
};

const DT: f64 = 1.0 / 60.0;

/// The constraints a case puts on the cape.
type Painting = fn(&Cloth) -> LimitSettings;

fn bench_limits(c: &mut Criterion) {
    let mut group = c.benchmark_group("limits/cape_777_nodes");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    let cases: [(&str, Painting); 5] = [
        ("none", |_| LimitSettings::default()),
        ("tethers", |_| LimitSettings {
            tether_scale: 1.05,
            ..Default::default()
        }),
        ("max_distance", |c| LimitSettings {
            max_distance: rig::demo_cape_limits(c).max_distance,
            ..Default::default()
        }),
        ("backstop", |c| LimitSettings {
            max_distance: Vec::new(),
            tether_scale: 0.0,
            ..rig::demo_cape_limits(c)
        }),
        ("all_three", |c| LimitSettings {
            tether_scale: 1.05,
            ..rig::demo_cape_limits(c)
        }),
    ];
    for (name, limits) in cases {
        let mut thirty = Walk::new(Animation::Walk, 60, |cloth| {
            let l = limits(cloth);
            cloth.set_limit_settings(l).expect("limits");
        })
        .thirty_frames();
        group.bench_function(name, |b| b.iter(&mut thirty));
    }
    group.finish();

    let mut group = c.benchmark_group("limits/hanging_cape");
    let hanging = || {
        let (w, h, cells) = (0.5f32, 0.8f32, 8);
        let base = BaseMesh::rectangle(w, h, cells, cells)
            .expect("rectangle")
            .map_positions(|p| Vec3::new(p.x - 0.5 * w, 1.5 - h + p.y, 0.0));
        let mesh = ClothMesh::new(&base).expect("mesh");
        let top: Vec<u32> = (0..=cells)
            .map(|i| BaseMesh::grid_index(cells, i, cells))
            .collect();
        let pins = mesh.nodes_for_vertices(&top, true);
        let mut cloth =
            Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default())
                .expect("cloth");
        cloth
            .set_limit_settings(LimitSettings {
                sleep: SleepSettings {
                    enabled: true,
                    ..Default::default()
                },
                ..Default::default()
            })
            .expect("sleep");
        while !cloth.is_sleeping() {
            cloth.step(DT).expect("step");
        }
        cloth
    };
    let mut awake = hanging();
    group.bench_function("awake", |b| {
        b.iter(|| {
            awake.wake();
            black_box(awake.step(DT).expect("step"))
        })
    });
    let mut asleep = hanging();
    group.bench_function("asleep", |b| {
        b.iter(|| black_box(asleep.step(DT).expect("step")))
    });
    group.finish();
}

criterion_group!(benches, bench_limits);
criterion_main!(benches);
