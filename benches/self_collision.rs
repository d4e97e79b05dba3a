//! Cost of self-collision on a frame.
//!
//! * `self_collision/cape_777_nodes/{off,on}`: 30 frames (1/60 s each) of the demo cape (777
//!   nodes, default budget, the character's 13 bodies on) while the character turns on the spot
//!   at 4 rad/s, its cape wrapping and folding onto itself, with self-collision off and on
//!   (thickness 4 mm); the same 30 frames every iteration (restored from a snapshot taken 1 s
//!   into the turn). Divide by 30 for a frame.
//!
//! Run: `cargo bench --bench self_collision`.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use isocloth::SelfCollisionSettings;
use isocloth::rig::Animation;

mod common;

use common::Walk;

fn bench_self_collision(c: &mut Criterion) {
    let mut group = c.benchmark_group("self_collision/cape_777_nodes");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    for (name, enabled) in [("off", false), ("on", true)] {
        let mut thirty = Walk::new(Animation::Spin { rate: 4.0 }, 60, |cloth| {
            cloth
                .set_self_collision(SelfCollisionSettings {
                    enabled,
                    ..Default::default()
                })
                .expect("self-collision");
        })
        .thirty_frames();
        group.bench_function(name, |b| b.iter(&mut thirty));
    }
    group.finish();
}

criterion_group!(benches, bench_self_collision);
criterion_main!(benches);
