//! Scenes shared by the benchmarks.

use std::hint::black_box;
use std::sync::Arc;

use glam::DVec3;
use isocloth::rig::{self, Animation, CharacterRig};
use isocloth::{Attachments, BaseMesh, Cloth, ClothMesh, ColliderSet, Pose, SolverSettings};

const DT: f64 = 1.0 / 60.0;

/// The hanging sheet: 1 m square of `cells` x `cells` base cells, and the nodes pinning its top
/// row (vertices and the edges between them). 22 cells is the 45x45-node sheet.
#[allow(dead_code)] // not used by every bench
pub fn hanging_sheet(cells: usize) -> (Arc<ClothMesh>, Vec<u32>) {
    let base = BaseMesh::rectangle(1.0, 1.0, cells, cells).expect("valid rectangle");
    let mesh = ClothMesh::new(&base).expect("valid mesh");
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    (Arc::new(mesh), pins)
}

/// The demo character with its cape and bodies.
pub struct Walk {
    rig: CharacterRig,
    cloth: Cloth,
    attachments: Attachments,
    colliders: ColliderSet,
    ids: Vec<(usize, usize, Pose)>,
    poses: Vec<Pose>,
}

#[allow(dead_code)] // used by the limits and self_collision benches only
impl Walk {
    /// The demo cape (default budget) on the character playing `animation`, set up by
    /// `configure`, after `frames` frames of it.
    pub fn new(animation: Animation, frames: usize, configure: impl FnOnce(&mut Cloth)) -> Self {
        let rig = CharacterRig::new(animation, DVec3::ZERO, 0.0);
        let mut poses = Vec::new();
        rig.poses(&mut poses);
        let mut cloth = rig::demo_cape(SolverSettings::default()).expect("cape");
        let attachments = rig::demo_cape_attachments(&cloth, &poses).expect("attachments");
        configure(&mut cloth);
        let mut colliders = ColliderSet::new();
        let mut ids = Vec::new();
        for (b, pose) in poses.iter().enumerate() {
            if let Some((shape, offset)) = CharacterRig::bone_collider(b) {
                let id = colliders.add(shape, pose.mul(&offset)).expect("collider");
                ids.push((b, id, offset));
            }
        }
        let mut walk = Self {
            rig,
            cloth,
            attachments,
            colliders,
            ids,
            poses,
        };
        for _ in 0..frames {
            walk.frame();
        }
        walk
    }

    /// The same 30 frames of the walk from here, every time (restored from a copy), so that
    /// every case times the same work.
    pub fn thirty_frames(&self) -> impl FnMut() + use<> {
        let (rig, snapshot) = (self.rig.clone(), self.cloth.snapshot());
        let (attachments, colliders) = (self.attachments.clone(), self.colliders.clone());
        let mut walk = Self {
            rig: rig.clone(),
            cloth: Cloth::new(self.cloth.model().clone()),
            attachments: attachments.clone(),
            colliders: colliders.clone(),
            ids: self.ids.clone(),
            poses: self.poses.clone(),
        };
        walk.cloth
            .set_limit_settings(self.cloth.limit_settings().clone())
            .expect("limits");
        walk.cloth
            .set_skin_targets(self.cloth.skin_targets())
            .expect("skin");
        walk.cloth
            .set_self_collision(*self.cloth.self_collision())
            .expect("self-collision");
        move || {
            walk.rig.clone_from(&rig);
            walk.attachments.clone_from(&attachments);
            walk.colliders.clone_from(&colliders);
            walk.cloth.restore(&snapshot).expect("restore");
            for _ in 0..30 {
                walk.frame();
            }
        }
    }

    /// The work ([`isocloth::StepCounters::work`]) of the 30 frames [`Walk::thirty_frames`]
    /// times: the same every run.
    pub fn thirty_frames_work(&self) -> f64 {
        let mut walk = Self {
            rig: self.rig.clone(),
            cloth: Cloth::new(self.cloth.model().clone()),
            attachments: self.attachments.clone(),
            colliders: self.colliders.clone(),
            ids: self.ids.clone(),
            poses: self.poses.clone(),
        };
        walk.cloth.restore(&self.cloth.snapshot()).expect("restore");
        (0..30).map(|_| walk.frame()).sum()
    }

    /// One frame; returns its work.
    fn frame(&mut self) -> f64 {
        self.rig.advance(DT);
        self.rig.poses(&mut self.poses);
        self.colliders.finish_frame();
        for &(b, id, offset) in &self.ids {
            let _ = self.colliders.set_pose(id, self.poses[b].mul(&offset));
        }
        let _ = self.attachments.apply(&mut self.cloth, &self.poses);
        let report = self.cloth.step_with(DT, &self.colliders).expect("step");
        black_box(report).counters.work()
    }
}
