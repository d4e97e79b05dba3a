//! Contact scenes (drops on bars, a sphere and the ground, a tilting bar, fast limbs, the cape) at three budget presets, checked against the contact bounds (about 4 minutes).
//!
//! A gallery of contact scenes, each run at the mobile, console and desktop budget presets
//! (`BudgetPreset::mobile()` 1 x 5, `console()` 2 x 5, `desktop()` 4 x 10, each of the
//! accelerated local-global map), at 60 Hz with the default material:
//!
//! - **a** `a-capsule-r{R}-mu{MU}`: a 0.6 m square sheet (12 x 12 cells, no pins) lying flat,
//!   centred, 0.2 m above the top of a capsule lying along X (half-height 0.4 m) and dropped onto
//!   it for 4 s; radius R = 0.03, 0.05, 0.1, 0.2 m by friction MU = 0, 0.1, 0.3, 0.8.
//! - **b** `b-sphere-r0.1`, `b-plane`: the same drop onto a sphere of radius 0.1 m and onto the
//!   ground plane y = 0 (default friction 0.3).
//! - **c** `c-tilt-mu0.8`, `c-tilt-mu0`: the sheet is dropped from 2 cm above a lying capsule
//!   (radius 0.05 m) and settles for 1 s; then the capsule's axis tilts to 20 degrees from
//!   horizontal (about world Z, so that the cloth would slide along the axis) over 0.5 s
//!   (smoothstep) and holds there for 2 s. Creep: displacement of the cloth's centre of mass
//!   along the capsule's axis over the 2 s hold. Friction 0.8 should hold the cloth (creep under
//!   1 cm), friction 0 should let it slide off (creep over 0.25 m, or no node left within 2 cm
//!   of the capsule).
//! - **d** `d-limb-r{R}-v{V}`: the `collide` example's sweep: a 1 m sheet (16 x 16) hangs from
//!   its pinned top edge, a capsule of radius R = 0.03, 0.04 m lying along X sweeps through it
//!   at V = 10, 20 m/s and stops; 1 s.
//! - **e** `e-collide-drop`: the `collide` example's drop (0.8 m sheet onto a capsule of radius
//!   0.1 m and a sphere of radius 0.12 m); 3 s as there.
//! - **f** `f-cape`: the `cape` demo's character and cape through the bevy_ecs layer, with
//!   `ClothConfig { budget: preset, .. }`, for the demo's 10 s, without game constraints.
//! - **g** `g-cape-limits`: the same with the demo's game constraints
//!   (`rig::demo_cape_limits`: max distance 0 at the collar to 0.4 m at the hem, a backstop
//!   1 cm behind the skinned cape).
//! - **h** the world's shapes, each row named after its shape: `h-box-table` (a 1 m tablecloth
//!   dropped on a table: a box top on four box legs), `h-box-edge` (the 0.6 m sheet across a
//!   box's edge, a third hanging over, friction 0.8), `h-box-corner` (over a box's top corner,
//!   friction 0.8), `h-convex-rock` (on the convex hull of 30 points), `h-heightfield-slope` (on
//!   a bumpy 20 degree slope, friction 0.8; `creep`: the centre of mass may move at most 1 cm
//!   over the last 2 s), `h-cylinder-pole-wind` (a banner hanging behind a 3 cm pole, blown
//!   round it by 4 m/s wind; not at rest), `h-trimesh-obj` (on the closed mesh
//!   `scenarios/meshes/mound.obj`), `h-tapered-limb-v10` (scene d with a tapered limb, radius
//!   4 cm to 2.5 cm, at 10 m/s). A body's core for `tunnelled_nodes` is, for these shapes, the
//!   body deeper than half its thinnest half-size (at most 1 cm), sampled at nine points of the
//!   path.
//!
//! Figures of a cell (one scene at one preset), with their JSON names:
//!
//! - `max_strain`, `mean_strain`, `pinned_max_strain`: the largest `Cloth::measures().max_strain`,
//!   `.mean_strain` and `.pinned_max_strain` (edges with both ends pinned, left out of the others)
//!   (render-mesh strain) over all frames;
//! - `rest_strain`: the largest `max_strain` over the last 0.5 s, for scenes whose cloth ends at
//!   rest on a body (a, b, c at friction 0.8, e; null for the others);
//! - `penetration_m`: the deepest any node got into a body's thickness layer at a frame's end
//!   (`ColliderSet::max_penetration`), over all frames;
//! - `tunnelled_nodes`: nodes that went through a body at least once. A node counts when, over a
//!   frame, its straight path in the body's frame (from its previous position seen in the body's
//!   pose at the frame's start to its position seen in the pose at the frame's end) passes
//!   through the body's core (the body shrunk to half its radius; for the ground, the node ends
//!   more than 1 cm below it), or when it ends a frame inside the body itself (signed distance
//!   below -1 mm). For d the larger of this and the `collide` example's footprint count (nodes
//!   behind the limb inside its footprint during the sweep and 5 frames after) is reported.
//!   The path is the straight chord over a whole frame, so a node that whips more than about
//!   130 degrees around a body within one frame (a torn, snapping cloth) is counted as well;
//! - `work_median`, `work_p99`, `work_max`: the frames' counted work (`isocloth::counters`),
//!   and at the top level `worst_work_ratio`, the largest of the cells' `work_max /
//!   work_median`;
//! - `frame_ms_median`, `frame_ms_p99`: wall time of the step call of each frame
//!   (`Cloth::step_with`; for f the whole ECS tick, as in `cape`). Cells run one after another
//!   on the main thread, so the timings are not disturbed by other cells (only by whatever else
//!   runs on the machine);
//! - `nodes_inside_body`: the most cloth nodes inside any body (signed distance below zero) at
//!   a frame's end, over the run;
//! - `recoveries`: `Cloth::recoveries()` (steps rolled back after a non-finite position);
//! - `non_finite`: whether any position was ever not finite at a frame's end;
//! - `creep_m`, `slid_off`: scene c only (null elsewhere);
//! - `ends_on_body` (not a check): for the scenes meant to end at rest on a body, whether some
//!   node is still within 1 cm of a body's thickness layer at the end (null for the others). A
//!   cloth that slid off (as at friction 0) is marked `off` in the table; its `rest_strain` is
//!   then that of a falling cloth, reported but not checked (the bound is on cloth at rest on a
//!   body);
//! - `frames`: frames run (fewer than the scene's length if a step returned an error);
//! - `pass` and `fails`: whether every check holds, and the names of those that do not.
//!
//! Checks: `max_strain` <= 0.10, `mean_strain` <= 0.01, `rest_strain` <= 0.01 (where defined
//! and the cloth ends on the body),
//! `penetration` <= 1 mm, `tunnelled` == 0, `non_finite` false, `recoveries` == 0; c at
//! friction 0.8: `creep` < 1 cm; c at friction 0: `slid_off`; f and g at console:
//! `console_max_strain` (max strain <= 0.02); g: `nodes_inside_body` == 0, and where f ran at
//! the same preset, `limits_not_worse` (g's max strain and penetration at most f's). A step that returns an error stops its cell and
//! fails it (`step_error`).
//!
//! Prints a table (scene rows by preset columns), the failed checks with their values, and
//! writes a contact sheet of every cell's last frame to `target/isocloth/contact_gallery.png`
//! (rows scenes, columns presets; labels need a system font such as DejaVu Sans and are left
//! out where there is none). The last line of stdout is one JSON object holding every cell's
//! figures. Progress goes to stderr.
//!
//! Run: `cargo run --release --example contact_gallery -- [--scene NAME] [--preset NAME]
//! [--seeds N]`. `--seeds N` runs every cell N times, each start moved by up to 1e-9 m per
//! coordinate (seed 0 is the unmoved run, whose figures the table and the cells' JSON keep), and
//! adds each cell's passes and the spread of its max strain; the JSON cells gain `seeds`. Contact
//! is sensitive at the rounding level (`docs/lab/speed.md` A.1), so a verdict that changes
//! between seeds is not a verdict on the method.
//! `--scene` picks the scene of that exact name, or else every scene whose name contains it
//! (`--scene a-capsule` runs scene a, `--scene mu0.8` every scene at friction 0.8);
//! `--preset` is `mobile`, `console` or `desktop`, or a preset file (`FILE.ron`, as `tune`
//! writes them) whose budget then forms the only column, under the file's name (a file named
//! `console` is also held to the console checks). Both default to everything. The whole
//! gallery (78 cells) takes about 2 minutes on two busy cores.

#[path = "common/cape_scene.rs"]
mod cape_scene;
#[path = "common/collide_scenes.rs"]
mod collide_scenes;
#[path = "common/render.rs"]
mod render;

use std::error::Error;
use std::sync::Arc;
use std::time::Instant;

use cape_scene::CapeScene;
use collide_scenes::{LimbSweep, lying, two_body_drop};
use glam::{DQuat, DVec2, DVec3, Vec3};
use isocloth::counters::FrameCosts;
use isocloth::ecs::{BudgetPreset, ClothConfig};
use isocloth::obj::{ObjMesh, ObjOptions};
use isocloth::{
    Aerodynamics, BaseMesh, Cloth, ClothMesh, ColliderId, ColliderSet, ColliderShape,
    ContactSettings, ConvexHull, HeightField, Material, Pose, SolverSettings, TriangleMesh,
};
use render::{Camera, Grid, Style};
use tiny_skia::{Pixmap, PixmapPaint, Transform};

/// Frame length: 60 Hz.
const DT: f64 = 1.0 / 60.0;
const GRAVITY: DVec3 = DVec3::new(0.0, -9.81, 0.0);
/// Frames of the last 0.5 s, over which `rest_strain` is taken.
const REST_FRAMES: usize = 30;
/// Scene c: frames of settling, of tilting and of holding the tilt.
const TILT_SETTLE: usize = 60;
const TILT_RAMP: usize = 30;
const TILT_HOLD: usize = 120;
const TILT_DEGREES: f64 = 20.0;
/// Contact-sheet picture size in pixels, and the height of the label band above each picture.
const TILE_W: u32 = 240;
const TILE_H: u32 = 180;
const LABEL_H: u32 = 32;

/// The body under the dropped sheet of scenes a and b.
#[derive(Debug, Clone, Copy)]
enum Body {
    /// Lying along X, half-height 0.4 m, centred at the origin.
    Capsule { radius: f64 },
    /// Centred at the origin.
    Sphere { radius: f64 },
    /// The ground y = 0.
    Plane,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// a, b: the 0.6 m sheet dropped from 0.2 m above the body's top.
    Drop { body: Body, friction: f64 },
    /// c: the sheet on a capsule that tilts.
    Tilt { friction: f64 },
    /// d: the fast limb.
    Limb(LimbSweep),
    /// e: the `collide` example's drop.
    CollideDrop,
    /// f, g: the `cape` demo, with its game constraints in g.
    Cape { limits: bool },
    /// h: cloth on the world's shapes.
    World(World),
}

/// Scenes h: the world's collider shapes (rows named after the shape).
#[derive(Debug, Clone, Copy)]
enum World {
    /// `h-box-table`: a 1 m tablecloth dropped on a table (a box top on four box legs).
    Table,
    /// `h-box-edge`: the 0.6 m sheet dropped across a box's straight edge (friction 0.8).
    Edge,
    /// `h-box-corner`: the sheet dropped over a box's top corner (friction 0.8).
    Corner,
    /// `h-convex-rock`: the sheet dropped on a rock, the convex hull of 30 points.
    Rock,
    /// `h-heightfield-slope`: the sheet dropped on a bumpy 20 degree slope, friction 0.8
    /// holding it (creep over the last 2 s under 1 cm).
    Slope,
    /// `h-cylinder-pole-wind`: a banner hanging behind a 3 cm pole, blown onto and round it by
    /// 4 m/s wind.
    Pole,
    /// `h-trimesh-obj`: the sheet dropped on a closed triangle mesh read from
    /// `scenarios/meshes/mound.obj`.
    Mesh,
}

struct Scene {
    name: String,
    kind: Kind,
}

impl Scene {
    /// Whether the cloth ends at rest on a body (rest strain is then measured).
    fn ends_at_rest(&self) -> bool {
        match self.kind {
            Kind::Drop { .. } | Kind::CollideDrop => true,
            Kind::World(w) => !matches!(w, World::Pole),
            Kind::Tilt { friction } => friction > 0.0,
            Kind::Limb(_) | Kind::Cape { .. } => false,
        }
    }
}

fn all_scenes() -> Vec<Scene> {
    let mut scenes = Vec::new();
    let mut add = |name: String, kind| scenes.push(Scene { name, kind });
    for radius in [0.03, 0.05, 0.1, 0.2] {
        for friction in [0.0, 0.1, 0.3, 0.8] {
            add(
                format!("a-capsule-r{radius}-mu{friction}"),
                Kind::Drop {
                    body: Body::Capsule { radius },
                    friction,
                },
            );
        }
    }
    let friction = ContactSettings::default().friction;
    add(
        "b-sphere-r0.1".into(),
        Kind::Drop {
            body: Body::Sphere { radius: 0.1 },
            friction,
        },
    );
    add(
        "b-plane".into(),
        Kind::Drop {
            body: Body::Plane,
            friction,
        },
    );
    for friction in [0.8, 0.0] {
        add(format!("c-tilt-mu{friction}"), Kind::Tilt { friction });
    }
    for radius in [0.03, 0.04] {
        for speed in [10.0, 20.0] {
            add(
                format!("d-limb-r{radius}-v{speed}"),
                Kind::Limb(LimbSweep {
                    radius,
                    speed,
                    taper: None,
                }),
            );
        }
    }
    add("e-collide-drop".into(), Kind::CollideDrop);
    for (name, world) in [
        ("h-box-table", World::Table),
        ("h-box-edge", World::Edge),
        ("h-box-corner", World::Corner),
        ("h-convex-rock", World::Rock),
        ("h-heightfield-slope", World::Slope),
        ("h-cylinder-pole-wind", World::Pole),
        ("h-trimesh-obj", World::Mesh),
    ] {
        add(name.into(), Kind::World(world));
    }
    add(
        "h-tapered-limb-v10".into(),
        Kind::Limb(LimbSweep {
            radius: 0.04,
            speed: 10.0,
            taper: Some(0.025),
        }),
    );
    add("f-cape".into(), Kind::Cape { limits: false });
    add("g-cape-limits".into(), Kind::Cape { limits: true });
    scenes
}

/// The 0.6 m sheet of scenes a to c (12 x 12 cells, no pins), flat at height `y`, centred on
/// the Y axis.
fn small_sheet(y: f32, settings: SolverSettings) -> Result<Cloth, Box<dyn Error>> {
    let base = BaseMesh::rectangle(0.6, 0.6, 12, 12)?
        .map_positions(|p| Vec3::new(p.x - 0.3, y, -(p.y - 0.3)));
    Ok(Cloth::from_mesh(
        ClothMesh::new(&base)?,
        Material::default(),
        &[],
        settings,
    )?)
}

fn capsule(radius: f64) -> ColliderShape {
    ColliderShape::Capsule {
        half_height: 0.4,
        radius,
    }
}

/// How the bodies move, and what is watched as they do.
enum Motion {
    Still,
    /// Scene c: the capsule `id` tilts; `com_hold` is the centre of mass when the hold starts.
    Tilt {
        id: ColliderId,
        com_hold: Option<DVec3>,
    },
    /// Scene d: the limb `id` sweeps; `footprint` is `collide`'s count.
    Sweep {
        id: ColliderId,
        sweep: LimbSweep,
        footprint: usize,
    },
    /// Still bodies; `com` is the centre of mass after frame `from` (creep is measured from it).
    Hold {
        from: usize,
        com: Option<DVec3>,
    },
}

/// Scene c: the capsule's rotation at the end of frame `frame`.
fn tilt_rotation(frame: usize) -> DQuat {
    let s = ((frame + 1).saturating_sub(TILT_SETTLE) as f64 / TILT_RAMP as f64).min(1.0);
    let angle = TILT_DEGREES.to_radians() * s * s * (3.0 - 2.0 * s);
    DQuat::from_rotation_z(angle) * lying(DVec3::ZERO).rotation
}

impl Motion {
    /// Sets the bodies' poses at the end of frame `frame`.
    fn pose(&self, frame: usize, colliders: &mut ColliderSet) -> Result<(), Box<dyn Error>> {
        match *self {
            Motion::Still | Motion::Hold { .. } => {}
            Motion::Tilt { id, .. } => {
                colliders.set_pose(id, Pose::new(DVec3::ZERO, tilt_rotation(frame)))?;
            }
            Motion::Sweep { id, sweep, .. } => {
                colliders.set_pose(id, sweep.pose_after(Some(frame)))?;
            }
        }
        Ok(())
    }

    /// Watches the cloth after frame `frame`.
    fn observe(&mut self, frame: usize, cloth: &Cloth) {
        match self {
            Motion::Still => {}
            Motion::Hold { from, com } => {
                if frame == *from {
                    *com = Some(cloth.center_of_mass());
                }
            }
            Motion::Tilt { com_hold, .. } => {
                if frame + 1 == TILT_SETTLE + TILT_RAMP {
                    *com_hold = Some(cloth.center_of_mass());
                }
            }
            Motion::Sweep {
                sweep, footprint, ..
            } => {
                if frame < sweep.footprint_frames() {
                    let z = sweep.z_after(Some(frame));
                    *footprint = (*footprint).max(sweep.behind(cloth.positions(), z));
                }
            }
        }
    }
}

/// Figures gathered frame by frame.
struct Recorder {
    frames: usize,
    rest_from: Option<usize>,
    max_strain: f64,
    mean_strain: f64,
    pinned_max_strain: f64,
    rest_strain: Option<f64>,
    penetration: f64,
    times_ms: Vec<f64>,
    /// Each frame's counted work (`isocloth::counters`).
    work: Vec<f64>,
    non_finite: bool,
    previous: Vec<DVec3>,
    tunnelled: Vec<bool>,
    inside: usize,
}

impl Recorder {
    /// For a cloth at its start, run for `frames` frames; rest strain over the last 0.5 s if
    /// `rest`.
    fn new(start: &[DVec3], frames: usize, rest: bool) -> Self {
        Self {
            frames: 0,
            rest_from: rest.then(|| frames.saturating_sub(REST_FRAMES)),
            max_strain: 0.0,
            mean_strain: 0.0,
            pinned_max_strain: 0.0,
            rest_strain: None,
            penetration: 0.0,
            times_ms: Vec::with_capacity(frames),
            work: Vec::with_capacity(frames),
            non_finite: false,
            previous: start.to_vec(),
            tunnelled: vec![false; start.len()],
            inside: 0,
        }
    }

    /// Records a frame just stepped: `colliders` still holds the frame's start and end poses
    /// (before `finish_frame`).
    fn record(&mut self, cloth: &Cloth, colliders: &ColliderSet, (ms, work): (f64, f64)) {
        let frame = self.frames;
        self.frames += 1;
        self.times_ms.push(ms);
        self.work.push(work);
        let m = cloth.measures();
        self.max_strain = self.max_strain.max(m.max_strain);
        self.mean_strain = self.mean_strain.max(m.mean_strain);
        self.pinned_max_strain = self.pinned_max_strain.max(m.pinned_max_strain);
        if self.rest_from.is_some_and(|from| frame >= from) {
            self.rest_strain = Some(self.rest_strain.unwrap_or(0.0).max(m.max_strain));
        }
        let positions = cloth.positions();
        let thickness = cloth.contact_settings().thickness;
        self.penetration = self
            .penetration
            .max(colliders.max_penetration(positions, thickness));
        self.non_finite |= positions.iter().any(|p| !p.is_finite());
        self.inside = self
            .inside
            .max(cape_scene::nodes_inside(colliders, positions));
        for id in 0..colliders.len() {
            let (Some(shape), Some(before), Some(after)) = (
                colliders.shape(id),
                colliders.pose_at(id, 0.0),
                colliders.pose(id),
            ) else {
                continue;
            };
            let core = Core::new(&shape);
            for (node, (&a, &b)) in self.previous.iter().zip(positions).enumerate() {
                if self.tunnelled[node] || !(a.is_finite() && b.is_finite()) {
                    continue;
                }
                let inside = colliders.signed_distance(id, b).is_some_and(|d| d < -1e-3);
                if inside || core.crossed(&before, &after, a, b) {
                    self.tunnelled[node] = true;
                }
            }
        }
        self.previous.copy_from_slice(positions);
    }

    fn tunnelled(&self) -> usize {
        self.tunnelled.iter().filter(|&&t| t).count()
    }

    /// Median and 99th percentile (nearest rank) of the frame times.
    fn timing(&self) -> (f64, f64) {
        let mut t = self.times_ms.clone();
        if t.is_empty() {
            return (f64::NAN, f64::NAN);
        }
        t.sort_by(f64::total_cmp);
        let rank = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize];
        (rank(0.5), rank(0.99))
    }
}

/// A body's core, which no node's path may cross: within half its radius of a capsule's axis or
/// a sphere's centre, over 1 cm below a plane, and for the other shapes deeper inside than half
/// their thinnest half-size (at most 1 cm), sampled at nine points of the path.
enum Core {
    Segment(DVec3, f64),
    Plane,
    Deep(ColliderSet, f64),
}

impl Core {
    fn new(shape: &ColliderShape) -> Self {
        let depth = match *shape {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => return Core::Segment(DVec3::new(0.0, half_height, 0.0), 0.5 * radius),
            ColliderShape::Sphere { radius } => return Core::Segment(DVec3::ZERO, 0.5 * radius),
            ColliderShape::Plane => return Core::Plane,
            ColliderShape::Cuboid { half_extents } => 0.5 * half_extents.min_element(),
            ColliderShape::Cylinder {
                half_height,
                radius,
            } => 0.5 * half_height.min(radius),
            ColliderShape::TaperedCapsule {
                bottom_radius,
                top_radius,
                ..
            } => 0.5 * bottom_radius.min(top_radius),
            _ => 0.01,
        };
        let mut local = ColliderSet::new();
        local
            .add(shape.clone(), Pose::IDENTITY)
            .expect("a shape from the set is valid");
        Core::Deep(local, depth.min(0.01))
    }

    /// Whether a node's straight path from world `a` (seen in pose `before`) to world `b` (seen
    /// in `after`) passes through the core.
    fn crossed(&self, before: &Pose, after: &Pose, a: DVec3, b: DVec3) -> bool {
        let (p, q) = (
            before.inverse_transform_point(a),
            after.inverse_transform_point(b),
        );
        match self {
            Core::Segment(axis, r) => segment_distance(p, q, -*axis, *axis) < *r,
            Core::Plane => q.y < -0.01,
            Core::Deep(local, depth) => (0..=8).any(|k| {
                local
                    .signed_distance(0, p.lerp(q, k as f64 / 8.0))
                    .is_some_and(|d| d < -depth)
            }),
        }
    }
}

/// Distance between the segments `p1 q1` and `p2 q2` (either may be a point): Ericson,
/// Real-Time Collision Detection, 5.1.9.
fn segment_distance(p1: DVec3, q1: DVec3, p2: DVec3, q2: DVec3) -> f64 {
    let (d1, d2, r) = (q1 - p1, q2 - p2, p1 - p2);
    let (a, e, f) = (d1.length_squared(), d2.length_squared(), d2.dot(r));
    let tiny = 1e-20;
    let (s, t) = if a <= tiny && e <= tiny {
        (0.0, 0.0)
    } else if a <= tiny {
        (0.0, (f / e).clamp(0.0, 1.0))
    } else {
        let c = d1.dot(r);
        if e <= tiny {
            ((-c / a).clamp(0.0, 1.0), 0.0)
        } else {
            let b = d1.dot(d2);
            let denom = a * e - b * b;
            let s = if denom > 1e-12 * a * e {
                ((b * f - c * e) / denom).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let t = (b * s + f) / e;
            if t < 0.0 {
                ((-c / a).clamp(0.0, 1.0), 0.0)
            } else if t > 1.0 {
                (((b - c) / a).clamp(0.0, 1.0), 1.0)
            } else {
                (s, t)
            }
        }
    };
    ((p1 + d1 * s) - (p2 + d2 * t)).length()
}

/// One check of a cell: its name, whether it holds, and the figure against its limit.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

/// The figures of one scene at one preset.
struct Cell {
    scene: String,
    preset: String,
    frames: usize,
    max_strain: f64,
    mean_strain: f64,
    pinned_max_strain: f64,
    rest_strain: Option<f64>,
    penetration: f64,
    tunnelled: usize,
    inside: usize,
    median_ms: f64,
    p99_ms: f64,
    /// The frames' work: median, 99th percentile, maximum.
    work: (f64, f64, f64),
    recoveries: u64,
    non_finite: bool,
    creep: Option<f64>,
    slid_off: Option<bool>,
    ends_on_body: Option<bool>,
    checks: Vec<Check>,
    tile: Pixmap,
    /// With `--seeds N`, the figures of every seed (seed 0 is this cell's own run).
    seeds: Vec<SeedRun>,
}

/// One seed's run of a cell (`--seeds`): its start moved by [`JITTER`].
struct SeedRun {
    max_strain: f64,
    mean_strain: f64,
    penetration: f64,
    tunnelled: usize,
    pass: bool,
}

impl SeedRun {
    fn of(cell: &Cell) -> Self {
        Self {
            max_strain: cell.max_strain,
            mean_strain: cell.mean_strain,
            penetration: cell.penetration,
            tunnelled: cell.tunnelled,
            pass: cell.pass(),
        }
    }
}

impl Cell {
    fn pass(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    fn fails(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name)
            .collect()
    }

    fn json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({
            "scene": self.scene,
            "preset": self.preset,
            "frames": self.frames,
            "max_strain": self.max_strain,
            "mean_strain": self.mean_strain,
            "pinned_max_strain": self.pinned_max_strain,
            "rest_strain": self.rest_strain,
            "penetration_m": self.penetration,
            "tunnelled_nodes": self.tunnelled,
            "nodes_inside_body": self.inside,
            "frame_ms_median": self.median_ms,
            "frame_ms_p99": self.p99_ms,
            "work_median": self.work.0,
            "work_p99": self.work.1,
            "work_max": self.work.2,
            "recoveries": self.recoveries,
            "non_finite": self.non_finite,
            "creep_m": self.creep,
            "slid_off": self.slid_off,
            "ends_on_body": self.ends_on_body,
            "pass": self.pass(),
            "fails": self.fails(),
        });
        if self.seeds.len() > 1 {
            json["seeds"] = self
                .seeds
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "max_strain": s.max_strain,
                        "mean_strain": s.mean_strain,
                        "penetration_m": s.penetration,
                        "tunnelled_nodes": s.tunnelled,
                        "pass": s.pass,
                    })
                })
                .collect();
        }
        json
    }

    /// Seeds whose run passes.
    fn seed_passes(&self) -> usize {
        self.seeds.iter().filter(|s| s.pass).count()
    }
}

/// What a finished run leaves for its cell: the frame-by-frame figures, the scene's own
/// figures and the picture of its last frame.
struct Outcome {
    rec: Recorder,
    recoveries: u64,
    error: Option<String>,
    creep: Option<f64>,
    slid_off: Option<bool>,
    ends_on_body: Option<bool>,
    extra_tunnelled: usize,
    tile: Pixmap,
}

/// A fixed camera for the scenes built around the origin.
fn fixed_camera(kind: &Kind) -> Camera {
    let (eye, target) = match kind {
        Kind::Limb(_) => (DVec3::new(1.7, 1.1, 1.9), DVec3::new(0.0, 0.5, 0.15)),
        Kind::CollideDrop => (DVec3::new(1.0, 0.8, 1.25), DVec3::new(0.0, -0.05, 0.0)),
        Kind::World(World::Table) => (DVec3::new(1.1, 0.8, 1.4), DVec3::new(0.0, -0.2, 0.0)),
        Kind::World(World::Pole) => (DVec3::new(0.9, 0.9, 1.2), DVec3::new(0.0, 0.3, 0.0)),
        _ => (DVec3::new(0.6, 0.45, 0.8), DVec3::new(0.0, -0.08, 0.0)),
    };
    Camera::look_at(eye, target, 0.8, TILE_W, TILE_H)
}

/// Scene `h-cylinder-pole-wind`: the wind's speed (m/s).
const WIND: f64 = 4.0;

/// Scenes h: the cloth, the world's bodies, how they move and the frames to run.
fn world_scene(
    world: World,
    settings: SolverSettings,
) -> Result<(Cloth, ColliderSet, Motion, usize), Box<dyn Error>> {
    let mut colliders = ColliderSet::new();
    let cuboid = |x: f64, y: f64, z: f64| ColliderShape::Cuboid {
        half_extents: DVec3::new(x, y, z),
    };
    let at = |x: f64, y: f64, z: f64| Pose::from_translation(DVec3::new(x, y, z));
    let mut friction = ContactSettings::default().friction;
    let mut motion = Motion::Still;
    let mut frames = 240;
    let cloth = match world {
        World::Table => {
            // Top 0.8 x 0.5 m, 3 cm thick, its upper face at y = 0; legs 4 cm square.
            colliders.add(cuboid(0.4, 0.015, 0.25), at(0.0, -0.015, 0.0))?;
            for (x, z) in [(-0.35, -0.2), (0.35, -0.2), (-0.35, 0.2), (0.35, 0.2)] {
                colliders.add(cuboid(0.02, 0.35, 0.02), at(x, -0.38, z))?;
            }
            let base = BaseMesh::rectangle(1.0, 1.0, 16, 16)?
                .map_positions(|p| Vec3::new(p.x - 0.5, 0.2, -(p.y - 0.5)));
            Cloth::from_mesh(ClothMesh::new(&base)?, Material::default(), &[], settings)?
        }
        World::Edge => {
            // A 0.6 m box whose top face is at y = 0 and whose edge along Z is 0.1 m from the
            // sheet's centre: a third of the sheet hangs over it. Friction 0.8 (cloth on wood)
            // holds that; at 0.3 the hanging third outweighs what friction on the other two
            // can hold and the sheet slides off, as it should.
            friction = 0.8;
            colliders.add(cuboid(0.3, 0.3, 0.3), at(-0.2, -0.3, 0.0))?;
            small_sheet(0.2, settings)?
        }
        World::Corner => {
            // The box's top corner 0.2 m from the sheet's centre along X and Z: the sheet
            // drapes over two edges and the corner, 69 % of it on the top (friction 0.8).
            friction = 0.8;
            colliders.add(cuboid(0.3, 0.3, 0.3), at(-0.1, -0.3, -0.1))?;
            small_sheet(0.2, settings)?
        }
        World::Rock => {
            colliders.add(
                ColliderShape::ConvexHull(Arc::new(ConvexHull::new(rock_points(30))?)),
                Pose::IDENTITY,
            )?;
            small_sheet(0.32, settings)?
        }
        World::Slope => {
            friction = 0.8;
            let field = slope_field();
            let start = 0.05
                + (0..=12)
                    .flat_map(|i| (0..=12).map(move |j| (i, j)))
                    .map(|(i, j)| slope_height(-0.3 + 0.05 * i as f64, -0.3 + 0.05 * j as f64))
                    .fold(f64::MIN, f64::max);
            colliders.add(ColliderShape::HeightField(Arc::new(field)), Pose::IDENTITY)?;
            motion = Motion::Hold {
                from: 119,
                com: None,
            };
            small_sheet(start as f32, settings)?
        }
        World::Pole => {
            colliders.add(
                ColliderShape::Cylinder {
                    half_height: 0.6,
                    radius: 0.015,
                },
                at(0.0, 0.4, 0.0),
            )?;
            let cells = 12;
            let base = BaseMesh::rectangle(0.6, 0.6, cells, cells)?
                .map_positions(|p| Vec3::new(p.x - 0.3, p.y + 0.3, 0.06));
            let mesh = ClothMesh::new(&base)?;
            let top: Vec<u32> = (0..=cells)
                .map(|i| BaseMesh::grid_index(cells, i, cells))
                .collect();
            let pins = mesh.nodes_for_vertices(&top, true);
            let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, settings)?;
            cloth.set_aerodynamics(Aerodynamics::cloth(DVec3::new(0.0, 0.0, -WIND)))?;
            frames = 180;
            cloth
        }
        World::Mesh => {
            let file =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/meshes/mound.obj");
            colliders.add(
                ColliderShape::TriMesh(Arc::new(obj_trimesh(&file)?)),
                Pose::IDENTITY,
            )?;
            small_sheet(0.35, settings)?
        }
    };
    let mut cloth = cloth;
    cloth.set_contact_settings(ContactSettings {
        friction,
        ..ContactSettings::default()
    })?;
    Ok((cloth, colliders, motion, frames))
}

/// A collider mesh from an OBJ file: the file's vertices (merged where they coincide) and
/// triangles, by the rules of `isocloth::obj`.
fn obj_trimesh(file: &std::path::Path) -> Result<TriangleMesh, Box<dyn Error>> {
    let reader = std::fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let obj = ObjMesh::read(&mut std::io::BufReader::new(reader), &ObjOptions::default())?;
    let vertices = obj.base.positions.iter().map(|p| p.as_dvec3()).collect();
    Ok(TriangleMesh::new(vertices, obj.base.triangles)?)
}

/// Scene `h-convex-rock`: `n` points on a lumpy ellipsoid (0.25 x 0.15 x 0.2 m) resting on
/// y = 0, from a fixed sequence (golden-angle spiral, radii varied by a fixed pattern).
fn rock_points(n: usize) -> Vec<DVec3> {
    (0..n)
        .map(|k| {
            let y = 1.0 - 2.0 * (k as f64 + 0.5) / n as f64;
            let r = (1.0 - y * y).sqrt();
            let a = k as f64 * 2.399_963_229_728_653;
            let lump = 1.0 + 0.12 * ((k * 7 % 5) as f64 / 4.0 - 0.5);
            DVec3::new(0.25 * r * a.cos(), 0.15 * y + 0.15, 0.2 * r * a.sin()) * lump
        })
        .collect()
}

/// Scene `h-heightfield-slope`: height over (x, z): a 20 degree slope down toward +X with
/// 1 cm bumps.
fn slope_height(x: f64, z: f64) -> f64 {
    -20f64.to_radians().tan() * x + 0.01 * (9.0 * x).sin() * (7.0 * z).cos()
}

/// The slope's height field: 2 x 2 m, 33 x 33 samples.
fn slope_field() -> HeightField {
    let n = 33;
    let heights = (0..n)
        .flat_map(|r| {
            (0..n).map(move |c| {
                slope_height(
                    -1.0 + 2.0 * c as f64 / (n - 1) as f64,
                    -1.0 + 2.0 * r as f64 / (n - 1) as f64,
                )
            })
        })
        .collect();
    HeightField::new(n, n, DVec2::new(2.0, 2.0), heights).expect("a valid height field")
}

/// How far a seeded run moves each node's start (metres per coordinate; `--seeds`).
const JITTER: f64 = 1e-9;

/// Scenes a to e: a core cloth stepped with `Cloth::step_with`, its start moved by
/// [`JITTER`] for a seed other than 0.
fn run_core(scene: &Scene, settings: SolverSettings, seed: u64) -> Result<Outcome, Box<dyn Error>> {
    let (mut cloth, mut colliders, mut motion, frames) = match scene.kind {
        Kind::Drop { body, friction } => {
            let mut colliders = ColliderSet::new();
            let top = match body {
                Body::Capsule { radius } => {
                    colliders.add(capsule(radius), lying(DVec3::ZERO))?;
                    radius
                }
                Body::Sphere { radius } => {
                    colliders.add(ColliderShape::Sphere { radius }, Pose::IDENTITY)?;
                    radius
                }
                Body::Plane => {
                    colliders.add(ColliderShape::Plane, Pose::IDENTITY)?;
                    0.0
                }
            };
            let mut cloth = small_sheet((top + 0.2) as f32, settings)?;
            cloth.set_contact_settings(ContactSettings {
                friction,
                ..ContactSettings::default()
            })?;
            (cloth, colliders, Motion::Still, 240)
        }
        Kind::Tilt { friction } => {
            let mut colliders = ColliderSet::new();
            let id = colliders.add(capsule(0.05), lying(DVec3::ZERO))?;
            let mut cloth = small_sheet(0.05 + 0.02, settings)?;
            cloth.set_contact_settings(ContactSettings {
                friction,
                ..ContactSettings::default()
            })?;
            let motion = Motion::Tilt { id, com_hold: None };
            (
                cloth,
                colliders,
                motion,
                TILT_SETTLE + TILT_RAMP + TILT_HOLD,
            )
        }
        Kind::Limb(sweep) => {
            let (cloth, colliders, id) = sweep.setup(settings)?;
            let motion = Motion::Sweep {
                id,
                sweep,
                footprint: 0,
            };
            (cloth, colliders, motion, 60)
        }
        Kind::CollideDrop => {
            let (cloth, colliders) = two_body_drop(settings)?;
            (cloth, colliders, Motion::Still, 180)
        }
        Kind::World(world) => world_scene(world, settings)?,
        Kind::Cape { .. } => unreachable!("the cape runs through the ECS"),
    };
    if seed != 0 {
        cloth.set_positions(&cape_scene::jittered(cloth.positions(), seed, JITTER))?;
    }
    let mut rec = Recorder::new(cloth.positions(), frames, scene.ends_at_rest());
    let mut error = None;
    for frame in 0..frames {
        motion.pose(frame, &mut colliders)?;
        let start = Instant::now();
        let result = cloth.step_with(DT, &colliders);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let work = match result {
            Ok(report) => report.counters.work(),
            Err(e) => {
                error = Some(format!("frame {frame}: {e}"));
                break;
            }
        };
        rec.record(&cloth, &colliders, (ms, work));
        motion.observe(frame, &cloth);
        colliders.finish_frame();
    }
    let (mut creep, mut slid_off, mut extra_tunnelled) = (None, None, 0);
    match motion {
        Motion::Still => {}
        Motion::Tilt { id, com_hold } => {
            let axis = tilt_rotation(frames - 1) * DVec3::Y;
            let moved = com_hold.map_or(f64::NAN, |c| (cloth.center_of_mass() - c).dot(axis));
            // Left the capsule: no node within 2 cm of its surface.
            let left = cloth
                .positions()
                .iter()
                .all(|&p| colliders.signed_distance(id, p).is_none_or(|d| d > 0.02));
            creep = Some(moved.abs());
            slid_off = Some(moved.abs() > 0.25 || left);
        }
        Motion::Sweep { footprint, .. } => extra_tunnelled = footprint,
        Motion::Hold { com, .. } => {
            creep = Some(com.map_or(f64::NAN, |c| cloth.center_of_mass().distance(c)));
        }
    }
    // Whether the cloth of a scene meant to end at rest on a body is still on one: some node
    // within 1 cm of the thickness layer of some body.
    let reach = cloth.contact_settings().thickness + 0.01;
    let ends_on_body = scene.ends_at_rest().then(|| {
        cloth.positions().iter().any(|&p| {
            (0..colliders.len())
                .any(|id| colliders.signed_distance(id, p).is_some_and(|d| d < reach))
        })
    });
    let mut positions = Vec::new();
    cloth.write_render_positions(&mut positions);
    let bodies: Vec<(ColliderShape, Pose)> = (0..colliders.len())
        .filter_map(|id| Some((colliders.shape(id)?, colliders.pose(id)?)))
        .collect();
    let ground = matches!(
        scene.kind,
        Kind::Drop {
            body: Body::Plane,
            ..
        }
    )
    .then_some(Grid {
        height: 0.0,
        center: DVec3::ZERO,
        spacing: 0.1,
        lines: 8,
    });
    let style = Style {
        ground,
        body_outlines: true,
        far_body_depth: true,
    };
    let tile = render::render(
        &fixed_camera(&scene.kind),
        &positions,
        &cloth.render_indices(),
        &bodies,
        &style,
        TILE_W,
        TILE_H,
    );
    Ok(Outcome {
        rec,
        recoveries: cloth.recoveries(),
        error,
        creep,
        slid_off,
        ends_on_body,
        extra_tunnelled,
        tile,
    })
}

/// Scenes f and g: the cape demo through the ECS at `preset`, with its game constraints if
/// `limits`.
fn run_cape(preset: &BudgetPreset, limits: bool, seed: u64) -> Result<Outcome, Box<dyn Error>> {
    const FRAMES: usize = 600;
    let mut cape = CapeScene::new(
        ClothConfig {
            budget: preset.clone(),
            ..ClothConfig::default()
        },
        limits,
    )?;
    cape.jitter(seed, JITTER)?;
    let mut rec = Recorder::new(cape.sim().cloth.positions(), FRAMES, false);
    let mut error = None;
    for frame in 0..FRAMES {
        let ms = cape.tick();
        let sim = cape.sim();
        if let Some(e) = &sim.last_error {
            error = Some(format!("frame {frame}: {e}"));
            break;
        }
        let work = sim.last_step.counters.work();
        rec.record(&sim.cloth, cape.colliders(), (ms, work));
    }
    let cam = Camera::following(cape.camera_target(), cape.walker.heading, TILE_W, TILE_H);
    let style = Style {
        ground: Some(Grid {
            height: 0.0,
            center: cape.walker.position,
            spacing: 1.0,
            lines: 8,
        }),
        // As in the `cape` demo: seen from behind, the cape hangs in front of the bodies.
        body_outlines: false,
        far_body_depth: false,
    };
    let mesh = cape.mesh();
    let tile = render::render(
        &cam,
        &mesh.positions,
        &mesh.indices,
        &cape.bodies(),
        &style,
        TILE_W,
        TILE_H,
    );
    Ok(Outcome {
        rec,
        recoveries: cape.sim().cloth.recoveries(),
        error,
        creep: None,
        slid_off: None,
        ends_on_body: None,
        extra_tunnelled: 0,
        tile,
    })
}

/// Scene g against f at each preset both ran at: the game constraints must not make the
/// cape's max strain or penetration worse.
fn limits_not_worse(cells: &mut [Cell]) {
    let plain: Vec<(String, f64, f64)> = cells
        .iter()
        .filter(|c| c.scene == "f-cape")
        .map(|c| (c.preset.clone(), c.max_strain, c.penetration))
        .collect();
    for c in cells.iter_mut().filter(|c| c.scene == "g-cape-limits") {
        if let Some((_, strain, pen)) = plain.iter().find(|p| p.0 == c.preset) {
            c.checks.push(Check {
                name: "limits_not_worse",
                ok: c.max_strain <= *strain && c.penetration <= *pen,
                detail: format!(
                    "with limits max strain {:.4} / penetration {:.2} mm, without {:.4} / {:.2} mm",
                    c.max_strain,
                    c.penetration * 1e3,
                    strain,
                    pen * 1e3
                ),
            });
        }
    }
}

fn run_cell(scene: &Scene, preset: &BudgetPreset, seed: u64) -> Result<Cell, Box<dyn Error>> {
    let out = match scene.kind {
        Kind::Cape { limits } => run_cape(preset, limits, seed)?,
        _ => run_core(scene, preset.settings(DT, GRAVITY)?, seed)?,
    };
    let rec = &out.rec;
    let tunnelled = rec.tunnelled().max(out.extra_tunnelled);
    let mut checks = vec![
        Check {
            name: "max_strain",
            ok: rec.max_strain <= 0.10,
            detail: format!("max strain {:.3} > 0.10", rec.max_strain),
        },
        Check {
            name: "mean_strain",
            ok: rec.mean_strain <= 0.01,
            detail: format!("mean strain {:.4} > 0.01", rec.mean_strain),
        },
        Check {
            name: "rest_strain",
            // The issue's bound is on cloth at rest on a body: a cloth that slid off is falling,
            // and its strain is held by the max and mean checks instead.
            ok: out.ends_on_body == Some(false) || rec.rest_strain.is_none_or(|s| s <= 0.01),
            detail: format!(
                "rest strain {:.4} > 0.01",
                rec.rest_strain.unwrap_or(f64::NAN)
            ),
        },
        Check {
            name: "penetration",
            ok: rec.penetration <= 0.001,
            detail: format!("penetration {:.2} mm > 1 mm", rec.penetration * 1e3),
        },
        Check {
            name: "tunnelled",
            ok: tunnelled == 0,
            detail: format!("{tunnelled} tunnelled nodes"),
        },
        Check {
            name: "non_finite",
            ok: !rec.non_finite,
            detail: "non-finite positions".into(),
        },
        Check {
            name: "recoveries",
            ok: out.recoveries == 0,
            detail: format!("{} recoveries", out.recoveries),
        },
    ];
    if let Kind::World(World::Slope) = scene.kind {
        let creep = out.creep.unwrap_or(f64::NAN);
        checks.push(Check {
            name: "creep",
            ok: creep < 0.01,
            detail: format!("creep {:.1} mm over the last 2 s >= 10 mm", creep * 1e3),
        });
    }
    if let Kind::Tilt { friction } = scene.kind {
        let creep = out.creep.unwrap_or(f64::NAN);
        if friction > 0.0 {
            checks.push(Check {
                name: "creep",
                ok: creep < 0.01,
                detail: format!("creep {:.1} mm over the hold >= 10 mm", creep * 1e3),
            });
        } else {
            checks.push(Check {
                name: "slid_off",
                ok: out.slid_off == Some(true),
                detail: format!(
                    "did not slide off (moved {:.1} mm along the axis)",
                    creep * 1e3
                ),
            });
        }
    }
    if matches!(scene.kind, Kind::Cape { .. }) && preset.name == "console" {
        checks.push(Check {
            name: "console_max_strain",
            ok: rec.max_strain <= 0.02,
            detail: format!("max strain {:.3} > 0.02 at console", rec.max_strain),
        });
    }
    if matches!(scene.kind, Kind::Cape { limits: true }) {
        checks.push(Check {
            name: "nodes_inside_body",
            ok: rec.inside == 0,
            detail: format!("{} nodes inside a body", rec.inside),
        });
    }
    if let Some(e) = &out.error {
        checks.push(Check {
            name: "step_error",
            ok: false,
            detail: format!("step error at {e}"),
        });
    }
    let (median_ms, p99_ms) = rec.timing();
    let mut costs = FrameCosts::with_capacity(rec.work.len());
    for (&w, &ms) in rec.work.iter().zip(&rec.times_ms) {
        costs.record(w, ms);
    }
    let c = costs.summary();
    Ok(Cell {
        scene: scene.name.clone(),
        preset: preset.name.clone(),
        frames: rec.frames,
        max_strain: rec.max_strain,
        mean_strain: rec.mean_strain,
        pinned_max_strain: rec.pinned_max_strain,
        rest_strain: rec.rest_strain,
        penetration: rec.penetration,
        tunnelled,
        inside: rec.inside,
        median_ms,
        p99_ms,
        work: (c.work_median, c.work_p99, c.work_max),
        recoveries: out.recoveries,
        non_finite: rec.non_finite,
        creep: out.creep,
        slid_off: out.slid_off,
        ends_on_body: out.ends_on_body,
        checks,
        tile: out.tile,
        seeds: Vec::new(),
    })
}

/// Escapes text for an SVG element.
fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The contact sheet: one tile per cell (rows scenes, columns presets), each labelled with its
/// scene, preset, max strain and verdict (text drawn by resvg with a system font).
fn contact_sheet(
    cells: &[Cell],
    scenes: &[&Scene],
    presets: &[BudgetPreset],
) -> Result<Pixmap, Box<dyn Error>> {
    let cell_h = LABEL_H + TILE_H;
    let (w, h) = (TILE_W * presets.len() as u32, cell_h * scenes.len() as u32);
    let mut sheet = Pixmap::new(w, h).ok_or("empty contact sheet")?;
    let mut svg = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}">"#);
    let font = r#"font-family="DejaVu Sans, Liberation Sans, Noto Sans, Arial, sans-serif""#;
    for cell in cells {
        let row = scenes
            .iter()
            .position(|s| s.name == cell.scene)
            .unwrap_or(0) as u32;
        let col = presets
            .iter()
            .position(|p| p.name == cell.preset)
            .unwrap_or(0) as u32;
        let (x, y) = (col * TILE_W, row * cell_h);
        sheet.draw_pixmap(
            x as i32,
            (y + LABEL_H) as i32,
            cell.tile.as_ref(),
            &PixmapPaint::default(),
            Transform::identity(),
            None,
        );
        let (verdict, colour) = if cell.pass() {
            ("PASS", "#1a7f37")
        } else {
            ("FAIL", "#c62828")
        };
        svg.push_str(&format!(
            r##"<rect x="{x}" y="{y}" width="{TILE_W}" height="{LABEL_H}" fill="#ffffff"/>"##
        ));
        svg.push_str(&format!(
            r##"<text x="{}" y="{}" {font} font-size="11" fill="#202020">{} / {}</text>"##,
            x + 5,
            y + 14,
            xml_escape(&cell.scene),
            xml_escape(&cell.preset)
        ));
        svg.push_str(&format!(
            r##"<text x="{}" y="{}" {font} font-size="11" fill="{colour}">max strain {:.2} %  {verdict}{}</text>"##,
            x + 5,
            y + 28,
            cell.max_strain * 100.0,
            if cell.ends_on_body == Some(false) {
                "  off body"
            } else {
                ""
            }
        ));
        // Tile borders.
        svg.push_str(&format!(
            r##"<rect x="{x}" y="{y}" width="{TILE_W}" height="{cell_h}" fill="none" stroke="#9aa4b0" stroke-width="1"/>"##
        ));
    }
    svg.push_str("</svg>");
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(&svg, &options)?;
    resvg::render(&tree, Transform::identity(), &mut sheet.as_mut());
    Ok(sheet)
}

/// One table cell: `max%/mean% pen-mm tunnelled median/p99-ms verdict`, and `off` where the
/// cloth ended off the body it should rest on.
fn table_cell(c: &Cell) -> String {
    format!(
        "{:.1}/{:.2} {:.2} {} {:.2}/{:.2} {}{}",
        c.max_strain * 100.0,
        c.mean_strain * 100.0,
        c.penetration * 1e3,
        c.tunnelled,
        c.median_ms,
        c.p99_ms,
        if c.pass() { "PASS" } else { "FAIL" },
        if c.ends_on_body == Some(false) {
            " off"
        } else {
            ""
        }
    )
}

struct Args {
    scene: Option<String>,
    preset: Option<String>,
    seeds: u64,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let mut args = Args {
        scene: None,
        preset: None,
        seeds: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (key, value) = match arg.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        let mut value = || value.clone().or_else(|| it.next()).ok_or("missing value");
        match key.as_str() {
            "--scene" => args.scene = Some(value()?),
            "--preset" => args.preset = Some(value()?),
            "--seeds" => {
                let v = value()?;
                args.seeds = v
                    .parse()
                    .ok()
                    .filter(|&n| (1..=100).contains(&n))
                    .ok_or(format!(
                        "--seeds takes a whole number from 1 to 100, got {v:?}"
                    ))?;
            }
            "-h" | "--help" => {
                println!(
                    "usage: contact_gallery [--scene NAME-OR-SUBSTRING] [--preset mobile|console|desktop|FILE.ron] [--seeds N]"
                );
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {arg:?} (try --help)").into()),
        }
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    let all = all_scenes();
    let scenes: Vec<&Scene> = match &args.scene {
        None => all.iter().collect(),
        Some(f) if all.iter().any(|s| &s.name == f) => {
            all.iter().filter(|s| &s.name == f).collect()
        }
        Some(f) => all.iter().filter(|s| s.name.contains(f.as_str())).collect(),
    };
    let presets: Vec<BudgetPreset> = match &args.preset {
        // A preset file (for example one `tune` wrote): its budget under its own name.
        Some(f) if f.ends_with(".ron") => {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{f}: {e}"))?;
            vec![BudgetPreset::from_ron(&text).map_err(|e| format!("{f}: {e}"))?]
        }
        _ => [
            BudgetPreset::mobile(),
            BudgetPreset::console(),
            BudgetPreset::desktop(),
        ]
        .into_iter()
        .filter(|p| args.preset.as_ref().is_none_or(|n| &p.name == n))
        .collect(),
    };
    if scenes.is_empty() || presets.is_empty() {
        return Err("no scene or no preset matches the filter".into());
    }

    let started = Instant::now();
    let total = scenes.len() * presets.len();
    let mut cells = Vec::with_capacity(total);
    for scene in &scenes {
        for preset in &presets {
            let t = Instant::now();
            let mut cell = run_cell(scene, preset, 0)?;
            if args.seeds > 1 {
                cell.seeds.push(SeedRun::of(&cell));
                for seed in 1..args.seeds {
                    cell.seeds
                        .push(SeedRun::of(&run_cell(scene, preset, seed)?));
                }
            }
            eprintln!(
                "[{:>2}/{total}] {:<22} {:<8} {:>6.1} s  {}",
                cells.len() + 1,
                scene.name,
                preset.name,
                t.elapsed().as_secs_f64(),
                if cell.pass() { "pass" } else { "FAIL" }
            );
            cells.push(cell);
        }
    }
    let run_s = started.elapsed().as_secs_f64();
    limits_not_worse(&mut cells);

    let out_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&out_dir)?;
    let sheet_path = out_dir.join("contact_gallery.png");
    contact_sheet(&cells, &scenes, &presets)?.save_png(&sheet_path)?;

    let budgets: Vec<String> = presets
        .iter()
        .map(|p| {
            format!(
                "{} {} x {} {:?}",
                p.name, p.substeps, p.iterations, p.method
            )
        })
        .collect();
    println!(
        "isocloth contact_gallery: {} scenes x {} presets at 60 Hz ({})",
        scenes.len(),
        presets.len(),
        budgets.join(", ")
    );
    println!(
        "cell: max%/mean% strain, penetration mm, tunnelled nodes, frame median/p99 ms, verdict \
         ('off': the cloth ended off its body)"
    );
    println!();
    let width = 40;
    let mut header = format!("{:<22}", "scene");
    for p in &presets {
        header.push_str(&format!(" | {:<width$}", p.name));
    }
    println!("{}", header.trim_end());
    println!("{}", "-".repeat(22 + presets.len() * (width + 3)));
    for (row, scene) in scenes.iter().enumerate() {
        let mut line = format!("{:<22}", scene.name);
        for cell in &cells[row * presets.len()..(row + 1) * presets.len()] {
            line.push_str(&format!(" | {:<width$}", table_cell(cell)));
        }
        println!("{}", line.trim_end());
    }
    let tilts: Vec<&Cell> = cells.iter().filter(|c| c.creep.is_some()).collect();
    if !tilts.is_empty() {
        println!();
        println!("scene c (creep of the centre of mass along the axis over the 2 s hold):");
        for c in tilts {
            println!(
                "  {:<13} {:<8} creep {:>9.2} mm  slid off {}",
                c.scene,
                c.preset,
                c.creep.unwrap_or(f64::NAN) * 1e3,
                c.slid_off.unwrap_or(false)
            );
        }
    }
    let off: Vec<String> = scenes
        .iter()
        .filter_map(|s| {
            let at: Vec<&str> = cells
                .iter()
                .filter(|c| c.scene == s.name && c.ends_on_body == Some(false))
                .map(|c| c.preset.as_str())
                .collect();
            (!at.is_empty()).then(|| format!("  {:<22} {}", s.name, at.join(", ")))
        })
        .collect();
    if !off.is_empty() {
        println!();
        println!(
            "cloth no longer on its body at the end (marked 'off'; rest strain there is that of a \
             falling cloth):"
        );
        println!("{}", off.join("\n"));
    }
    let failing: Vec<&Cell> = cells.iter().filter(|c| !c.pass()).collect();
    println!();
    println!(
        "{} of {} cells pass; failed checks:",
        cells.len() - failing.len(),
        cells.len()
    );
    for c in &failing {
        let details: Vec<&str> = c
            .checks
            .iter()
            .filter(|k| !k.ok)
            .map(|k| k.detail.as_str())
            .collect();
        println!("  {} / {}: {}", c.scene, c.preset, details.join("; "));
    }
    println!();
    if args.seeds > 1 {
        let n = args.seeds as usize;
        println!();
        println!(
            "over {n} seeds (each start moved by up to {JITTER:e} m; a cell's own checks, without \
             the cross-cell one): passes, and max strain % median [least, most]"
        );
        for c in &cells {
            let mut m: Vec<f64> = c.seeds.iter().map(|s| s.max_strain * 100.0).collect();
            m.sort_by(f64::total_cmp);
            println!(
                "  {:<22} {:<8} {}/{n}  {:>8.2} [{:.2}, {:.2}]",
                c.scene,
                c.preset,
                c.seed_passes(),
                m[m.len() / 2],
                m[0],
                m[m.len() - 1]
            );
        }
        let every = cells.iter().filter(|c| c.seed_passes() == n).count();
        let most = cells.iter().filter(|c| 2 * c.seed_passes() > n).count();
        println!(
            "{every} of {} cells pass at every seed, {most} at most seeds",
            cells.len()
        );
    }
    println!("cells run one after another in {run_s:.1} s");
    println!("contact sheet: {}", sheet_path.display());

    // The dearest frame's work over the median frame's, worst over the cells.
    let work_ratio = cells
        .iter()
        .map(|c| c.work.2 / c.work.0.max(1.0))
        .fold(0.0, f64::max);
    println!("worst cell: its dearest frame {work_ratio:.2}x its median frame's work");
    let json = serde_json::json!({
        "example": "contact_gallery",
        "worst_work_ratio": work_ratio,
        "cells": cells.iter().map(Cell::json).collect::<Vec<_>>(),
        "cells_total": cells.len(),
        "cells_passing": cells.len() - failing.len(),
        "all_pass": failing.is_empty(),
        "contact_sheet": sheet_path.display().to_string(),
    });
    println!("{json}");
    Ok(())
}
