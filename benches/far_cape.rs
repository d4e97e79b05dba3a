//! What a far cape costs a crowd's tick outside the solve: its skin and its render mesh.
//!
//! * `far_cape/follow/{every_node,motion}`: one tick of the demo cape (777 nodes) following its
//!   skin on the walking character: the attachments skinning every node and the cloth fitting
//!   their motion (`SkinUse::Every`), against the skin's motion from the bones alone
//!   (`SkinUse::Motion`), then `Cloth::follow_skin`.
//! * `far_cape/render/{positions_then_normals,one_call}`: its render positions and normals,
//!   as two calls (normals from the f64 positions) and as `Cloth::write_render_mesh`.
//!
//! Run: `cargo bench --bench far_cape`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use isocloth::rig::{self, Animation, CharacterRig};
use isocloth::{SkinUse, SolverSettings};

const DT: f64 = 1.0 / 60.0;

fn bench_far_cape(c: &mut Criterion) {
    let mut group = c.benchmark_group("far_cape/follow");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    for (name, skin) in [("every_node", SkinUse::Every), ("motion", SkinUse::Motion)] {
        let mut walker = CharacterRig::new(Animation::Walk, glam::DVec3::ZERO, 0.0);
        let mut poses = Vec::new();
        walker.poses(&mut poses);
        let mut cape = rig::demo_cape(SolverSettings::default()).expect("cape");
        let mut att = rig::demo_cape_attachments(&cape, &poses).expect("attachments");
        group.bench_function(name, |b| {
            b.iter(|| {
                walker.advance(DT);
                walker.poses(&mut poses);
                att.apply_using(&mut cape, &poses, false, skin)
                    .expect("apply");
                cape.follow_skin(DT, 0.0, 1.0).expect("follow");
                black_box(cape.positions()[0])
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("far_cape/render");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    let cape = rig::demo_cape(SolverSettings::default()).expect("cape");
    let (mut positions, mut normals) = (Vec::new(), Vec::new());
    group.bench_function("positions_then_normals", |b| {
        b.iter(|| {
            cape.write_render_positions(&mut positions);
            cape.write_render_normals(&mut normals);
            black_box(normals[0])
        })
    });
    group.bench_function("one_call", |b| {
        b.iter(|| {
            cape.write_render_mesh(&mut positions, &mut normals);
            black_box(normals[0])
        })
    });
    group.finish();
}

criterion_group!(benches, bench_far_cape);
criterion_main!(benches);
