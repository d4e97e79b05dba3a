//! Curtains: a limb driven through hanging layers at 3, 6 and 10 m/s presses the front curtain
//! into the ones behind and holds them there (1.5 s a speed, layered runs beside each curtain
//! alone, interleaved frame by frame).
//!
//! Layers under a driven body (`isocloth::layers`): two or three curtains (1.0 x 1.2 m, 10 x 12
//! base cells, the top row pinned to a rail 2 m up) hang 4 cm apart (`--gap`), the front one
//! at z = 0, the others behind it (-z). A horizontal capsule (an arm: radius 5 cm, 0.5 m long)
//! 1.3 m up starts 25 cm in front, is driven along -z at the speed through the front curtain's
//! plane and 20 cm past the last one's (`--depth`), and is held there to the clip's end: it
//! carries every curtain in front of its end point with it, the front pressed onto the next,
//! the body pressing both.
//!
//! Per speed, four kinds of run of the same clip at 60 Hz: **layers** (every two curtains meet,
//! `ClothLayers`, thickness 5 mm), and each curtain **alone** under the same limb. Crossings
//! are counted after every frame by an exact triangle-triangle test between every two
//! curtains' render meshes (`layers::layer_crossings`); `nan` counts frames with a
//! non-finite position; `inside` the most nodes inside the limb at a frame's end; strain is
//! render-mesh strain (docs/design.md section 6), the worst frame of each curtain.
//! `strain_ratio` is the larger over the curtains of a curtain's strain layered over its
//! strain alone; `step_ratio_median` the layered frame's median over the alone runs' medians
//! summed, `step_ratio_p99` the same of the 99th percentiles; `degraded_frames` the layered
//! frames whose pairs hit the layers' bound (`LayerSettings::max_pairs`), `most_pairs` the most
//! pairs the layer group held in a substep; `work_median`, `work_p99`, `work_max` the layered
//! frame's counted work (`isocloth::counters`; the frame the limb enters the layers is its
//! maximum) beside `alone_work_median` (the alone runs' medians summed), and `step_ms_max`.
//!
//! Prints a table, writes a contact sheet `target/isocloth/curtains_contact_sheet.png` (one
//! row per speed, layered run, seen from the side), then one JSON line: the preset, the
//! layers, and per speed (`"3"`, `"6"`, `"10"`) the figures above, plus `crossings`,
//! `nan_frames`, `max_strain` and `worst_strain_ratio` over every speed.
//!
//! Run: `cargo run --release --example curtains [-- --layers 2|3] [--speeds 3,6,10] [--gap M]
//! [--depth M] [--height M] [--preset mobile|console|desktop|SxI] [--obj DIR]` (default two
//! layers 4 cm apart, the limb 1.3 m up driven 20 cm past the last, console). `--obj` writes the
//! layered run's frames, one OBJ per curtain (`DIR/<speed>/curtain<k>/<frame>.obj`), for the
//! trajectory error against a converged run of the same scene (e.g. `--preset 8x20`).

#[path = "common/preset_arg.rs"]
mod preset_arg;
#[path = "common/render.rs"]
#[allow(dead_code)]
mod render;

use std::time::Instant;

use glam::{DQuat, DVec3, Vec3};
use isocloth::counters::FrameCosts;
use isocloth::ecs::BudgetPreset;
use isocloth::layers::layer_crossings;
use isocloth::{
    BaseMesh, Cloth, ClothLayers, ClothMesh, ColliderId, ColliderSet, ColliderShape, LayerSettings,
    Material, Pose, SolverSettings, StepReport,
};
use render::{Camera, ClothDraw, Style};
use tiny_skia::Pixmap;

const DT: f64 = 1.0 / 60.0;
const FRAMES: usize = 90;
/// When the limb starts moving (s).
const START: f64 = 0.1;
/// The limb: radius, half length (m), start 25 cm in front of the front curtain; its height is
/// `--height` (default 1.3 m).
const LIMB_RADIUS: f64 = 0.05;
const LIMB_HALF: f64 = 0.25;
const LIMB_Z0: f64 = 0.25;
/// Frames of the contact sheet (one per column).
const SHOTS: [usize; 5] = [8, 11, 16, 40, 89];

/// A curtain: 1.0 x 1.2 m, 10 x 12 base cells, hanging from a rail at y = 2 m at depth `z`,
/// its top row pinned.
fn curtain(settings: SolverSettings, z: f32) -> Result<Cloth, Box<dyn std::error::Error>> {
    let (cx, cy) = (10, 12);
    let (width, height) = (1.0f32, 1.2f32);
    let base = BaseMesh::rectangle(width, height, cx, cy)?
        .map_positions(|p| Vec3::new(p.x - 0.5 * width, 2.0 - height + p.y, z));
    let top: Vec<u32> = (0..=cx).map(|i| BaseMesh::grid_index(cx, i, cy)).collect();
    let mesh = ClothMesh::new(&base)?;
    let pins = mesh.nodes_for_vertices(&top, true);
    Ok(Cloth::from_mesh(
        mesh,
        Material::default(),
        &pins,
        settings,
    )?)
}

/// The limb's pose at time `t`: horizontal (along x), moving along -z at `speed` from
/// `LIMB_Z0` to `end`, then held.
fn limb_pose(t: f64, speed: f64, end: f64, height: f64) -> Pose {
    let z = (LIMB_Z0 - speed * (t - START).max(0.0)).max(end);
    Pose::new(
        DVec3::new(0.0, height, z),
        DQuat::from_rotation_z(std::f64::consts::FRAC_PI_2),
    )
}

/// Figures of one run.
#[derive(Default, Clone)]
struct Figures {
    crossings: usize,
    crossing_frames: usize,
    nan_frames: usize,
    inside: usize,
    max_strain: Vec<f64>,
    times_ms: Vec<f64>,
    /// Each frame's counted work, every curtain's (`isocloth::counters`).
    work: Vec<f64>,
    degraded_frames: usize,
    most_pairs: usize,
}

fn percentile(times: &[f64], q: f64) -> f64 {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    if t.is_empty() {
        return 0.0;
    }
    t[((t.len() - 1) as f64 * q).round() as usize]
}

/// One run: its limb, its curtains (all layered, or one alone).
struct Sim {
    colliders: ColliderSet,
    limb: ColliderId,
    speed: f64,
    end: f64,
    height: f64,
    layered: bool,
    layers: ClothLayers,
    cloths: Vec<Cloth>,
    reports: Vec<StepReport>,
    fig: Figures,
    shots: Vec<Vec<Vec<Vec3>>>,
}

impl Sim {
    fn new(
        settings: SolverSettings,
        count: usize,
        which: Option<usize>,
        (speed, gap, depth, height): (f64, f64, f64, f64),
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let end = -(count as f64 - 1.0) * gap - depth;
        let mut colliders = ColliderSet::new();
        let limb = colliders.add(
            ColliderShape::Capsule {
                half_height: LIMB_HALF,
                radius: LIMB_RADIUS,
            },
            limb_pose(0.0, speed, end, height),
        )?;
        let mut cloths = Vec::new();
        for k in 0..count {
            if which.is_none_or(|w| w == k) {
                cloths.push(curtain(settings, -(k as f64 * gap) as f32)?);
            }
        }
        let pairs: Vec<[usize; 2]> = if which.is_none() {
            (0..count)
                .flat_map(|a| (a + 1..count).map(move |b| [a, b]))
                .collect()
        } else {
            Vec::new()
        };
        let layers = ClothLayers::new(LayerSettings::default(), cloths.len(), &pairs)?;
        Ok(Self {
            colliders,
            limb,
            speed,
            end,
            height,
            layered: which.is_none(),
            layers,
            fig: Figures {
                max_strain: vec![0.0; cloths.len()],
                ..Default::default()
            },
            cloths,
            reports: Vec::new(),
            shots: Vec::new(),
        })
    }

    fn frame(&mut self, frame: usize) -> Result<(), Box<dyn std::error::Error>> {
        let t = (frame + 1) as f64 * DT;
        self.colliders
            .set_pose(self.limb, limb_pose(t, self.speed, self.end, self.height))?;
        let start = Instant::now();
        let mut work = 0.0;
        if self.layered {
            self.layers
                .step(&mut self.cloths, DT, &self.colliders, &mut self.reports)?;
        } else {
            for c in self.cloths.iter_mut() {
                work += c.step_with(DT, &self.colliders)?.counters.work();
            }
        }
        self.fig.times_ms.push(start.elapsed().as_secs_f64() * 1e3);
        if self.layered {
            work = self.reports.iter().map(|r| r.counters.work()).sum();
        }
        self.fig.work.push(work);
        self.colliders.finish_frame();
        if self.layered && self.layers.degraded() {
            self.fig.degraded_frames += 1;
        }
        self.fig.most_pairs = self.fig.most_pairs.max(self.layers.most_pairs());
        let mut nan = false;
        let mut inside = 0;
        for (k, c) in self.cloths.iter().enumerate() {
            nan |= c.positions().iter().any(|p| !p.is_finite());
            inside += self.colliders.count_inside(c.positions());
            self.fig.max_strain[k] = self.fig.max_strain[k].max(c.measures().max_strain);
        }
        self.fig.nan_frames += nan as usize;
        self.fig.inside = self.fig.inside.max(inside);
        let mut crossed = 0;
        for a in 0..self.cloths.len() {
            for b in a + 1..self.cloths.len() {
                let (ca, cb) = (&self.cloths[a], &self.cloths[b]);
                crossed += layer_crossings(
                    (ca.model().mesh().render_triangles(), ca.positions()),
                    (cb.model().mesh().render_triangles(), cb.positions()),
                );
            }
        }
        self.fig.crossings += crossed;
        if self.layered && SHOTS.contains(&frame) {
            self.shots.push(
                self.cloths
                    .iter()
                    .map(|c| c.positions().iter().map(|p| p.as_vec3()).collect())
                    .collect(),
            );
        }
        Ok(())
    }
}

fn main() {
    if let Err(e) = main_inner() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// A speed's figures: the layered run and each curtain alone.
struct SpeedResult {
    speed: f64,
    layered: Figures,
    alone: Vec<Figures>,
    shots: Vec<Vec<Vec<Vec3>>>,
    limb: Vec<Pose>,
    /// Each curtain's render triangles (flat).
    indices: Vec<Vec<u32>>,
}

impl SpeedResult {
    fn strain_ratio(&self) -> f64 {
        self.alone
            .iter()
            .enumerate()
            .map(|(k, a)| self.layered.max_strain[k] / a.max_strain[0].max(1e-9))
            .fold(0.0, f64::max)
    }
    fn step_ratio(&self, q: f64) -> f64 {
        let alone: f64 = self.alone.iter().map(|a| percentile(&a.times_ms, q)).sum();
        percentile(&self.layered.times_ms, q) / alone.max(1e-9)
    }
    fn json(&self) -> String {
        let list = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.6}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let alone_strain: Vec<f64> = self.alone.iter().map(|a| a.max_strain[0]).collect();
        let alone_ms: f64 = self
            .alone
            .iter()
            .map(|a| percentile(&a.times_ms, 0.5))
            .sum();
        let mut costs = FrameCosts::with_capacity(self.layered.times_ms.len());
        for (&w, &ms) in self.layered.work.iter().zip(&self.layered.times_ms) {
            costs.record(w, ms);
        }
        let c = costs.summary();
        let alone_work: f64 = self.alone.iter().map(|a| percentile(&a.work, 0.5)).sum();
        format!(
            "\"{}\":{{\"work_median\":{:.1},\"work_p99\":{:.1},\"work_max\":{:.1},\"alone_work_median\":{:.1},\"step_ms_max\":{:.4},\"crossings\":{},\"crossing_frames\":{},\"nan_frames\":{},\"inside\":{},\"max_strain\":[{}],\"alone_max_strain\":[{}],\"strain_ratio\":{:.4},\"step_ms_median\":{:.4},\"step_ms_p99\":{:.4},\"alone_step_ms_median\":{:.4},\"step_ratio_median\":{:.4},\"step_ratio_p99\":{:.4},\"degraded_frames\":{},\"most_pairs\":{}}}",
            self.speed,
            c.work_median,
            c.work_p99,
            c.work_max,
            alone_work,
            c.step_ms_max,
            self.layered.crossings,
            self.layered.crossing_frames,
            self.layered.nan_frames,
            self.layered.inside,
            list(&self.layered.max_strain),
            list(&alone_strain),
            self.strain_ratio(),
            percentile(&self.layered.times_ms, 0.5),
            percentile(&self.layered.times_ms, 0.99),
            alone_ms,
            self.step_ratio(0.5),
            self.step_ratio(0.99),
            self.layered.degraded_frames,
            self.layered.most_pairs
        )
    }
}

fn contact_sheet(
    results: &[SpeedResult],
    path: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut tiles: Vec<Pixmap> = Vec::new();
    let (w, h) = (240, 240);
    // Seen from the side and a little above, so the layers' gap shows.
    let target = DVec3::new(0.0, 1.35, -0.35);
    let camera = Camera::look_at(target + DVec3::new(2.6, 0.4, 0.3), target, 0.9, w, h);
    let colours = [
        (190.0, 40.0, 45.0),
        (70.0, 120.0, 200.0),
        (80.0, 160.0, 90.0),
    ];
    for r in results {
        for (shot, pose) in r.shots.iter().zip(&r.limb) {
            let draws: Vec<ClothDraw<'_>> = shot
                .iter()
                .zip(&r.indices)
                .zip(colours)
                .map(|((p, i), tint)| ClothDraw {
                    positions: p,
                    indices: i,
                    tint: Some(tint),
                })
                .collect();
            let bodies = vec![(
                ColliderShape::Capsule {
                    half_height: LIMB_HALF,
                    radius: LIMB_RADIUS,
                },
                *pose,
            )];
            let style = Style {
                ground: None,
                body_outlines: true,
                far_body_depth: false,
            };
            tiles.push(render::render_cloths(
                &camera, &draws, None, &bodies, &style, w, h,
            ));
        }
    }
    render::save_sheet(&tiles, SHOTS.len() as u32, path)
}

/// The layered run's frame `frame` at `speed` as one OBJ per curtain,
/// `DIR/<speed>/curtain<k>/<frame>.obj` (positions only: what `trajectory.py`-style checks of
/// two runs' centres of mass read).
fn write_obj_frames(
    dir: &std::path::Path,
    speed: f64,
    frame: usize,
    cloths: &[Cloth],
) -> Result<(), Box<dyn std::error::Error>> {
    use std::fmt::Write as _;
    for (k, c) in cloths.iter().enumerate() {
        let d = dir.join(format!("{speed}")).join(format!("curtain{k}"));
        std::fs::create_dir_all(&d)?;
        let mut text = String::new();
        for p in c.positions() {
            writeln!(text, "v {} {} {}", p.x, p.y, p.z)?;
        }
        std::fs::write(d.join(format!("{frame:04}.obj")), text)?;
    }
    Ok(())
}

fn main_inner() -> Result<(), Box<dyn std::error::Error>> {
    let mut preset = BudgetPreset::console();
    let mut count = 2usize;
    let mut speeds = vec![3.0, 6.0, 10.0];
    let mut gap = 0.04;
    let mut depth = 0.2;
    let mut height = 1.3;
    let mut obj: Option<std::path::PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} takes a value"));
        match arg.as_str() {
            "--layers" => {
                count = value("--layers")?.parse()?;
                if !(2..=3).contains(&count) {
                    return Err("--layers takes 2 or 3".into());
                }
            }
            "--speeds" => {
                speeds = value("--speeds")?
                    .split(',')
                    .map(|s| s.parse::<f64>())
                    .collect::<Result<_, _>>()?;
            }
            "--gap" => gap = value("--gap")?.parse()?,
            "--depth" => depth = value("--depth")?.parse()?,
            "--height" => height = value("--height")?.parse()?,
            "--preset" => preset = preset_arg::preset_named(&value("--preset")?)?,
            "--obj" => obj = Some(value("--obj")?.into()),
            other => {
                return Err(format!(
                    "unknown argument {other:?} (options: --layers N, --speeds A,B, --gap M, \
                     --depth M, --height M, --preset NAME, --obj DIR)"
                )
                .into());
            }
        }
    }
    let settings = preset.settings(DT, DVec3::new(0.0, -9.81, 0.0))?;
    let out_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&out_dir)?;
    let mut results = Vec::new();
    for &speed in &speeds {
        let mut sims = vec![Sim::new(
            settings,
            count,
            None,
            (speed, gap, depth, height),
        )?];
        for k in 0..count {
            sims.push(Sim::new(
                settings,
                count,
                Some(k),
                (speed, gap, depth, height),
            )?);
        }
        let indices: Vec<Vec<u32>> = sims[0]
            .cloths
            .iter()
            .map(|c| {
                c.model()
                    .mesh()
                    .render_triangles()
                    .iter()
                    .flatten()
                    .copied()
                    .collect()
            })
            .collect();
        for frame in 0..FRAMES {
            let n = sims.len();
            for k in 0..n {
                sims[(frame + k) % n].frame(frame)?;
            }
            if let Some(dir) = &obj {
                write_obj_frames(dir, speed, frame, &sims[0].cloths)?;
            }
        }
        let end = sims[0].end;
        let limb = SHOTS
            .iter()
            .map(|&f| limb_pose((f + 1) as f64 * DT, speed, end, height))
            .collect();
        let mut it = sims.into_iter();
        let first = it.next().ok_or("no run")?;
        results.push(SpeedResult {
            speed,
            layered: first.fig,
            shots: first.shots,
            alone: it.map(|s| s.fig).collect(),
            limb,
            indices,
        });
    }
    let sheet = out_dir.join("curtains_contact_sheet.png");
    contact_sheet(&results, &sheet)?;
    println!(
        "{count} curtains {gap} m apart, a limb driven {depth} m past the last and held, preset {} ({} x {}), layer thickness {} m, max pairs {}",
        preset.name,
        preset.substeps,
        preset.iterations,
        LayerSettings::default().thickness,
        LayerSettings::default().max_pairs,
    );
    println!(
        "{:>6} {:>9} {:>7} {:>4} {:>7} {:>22} {:>22} {:>7} {:>9} {:>9} {:>8}",
        "m/s",
        "crossings",
        "frames",
        "nan",
        "inside",
        "strain layered (%)",
        "strain alone (%)",
        "ratio",
        "ms median",
        "x alone",
        "x (p99)"
    );
    let pct = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{:.1}", x * 100.0))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    for r in &results {
        let alone: Vec<f64> = r.alone.iter().map(|a| a.max_strain[0]).collect();
        println!(
            "{:>6} {:>9} {:>7} {:>4} {:>7} {:>22} {:>22} {:>7.2} {:>9.3} {:>9.2} {:>8.2}",
            r.speed,
            r.layered.crossings,
            r.layered.crossing_frames,
            r.layered.nan_frames,
            r.layered.inside,
            pct(&r.layered.max_strain),
            pct(&alone),
            r.strain_ratio(),
            percentile(&r.layered.times_ms, 0.5),
            r.step_ratio(0.5),
            r.step_ratio(0.99)
        );
    }
    println!(
        "contact sheet (a row per speed, layered): {}",
        sheet.display()
    );
    let crossings: usize = results.iter().map(|r| r.layered.crossings).sum();
    let nan: usize = results.iter().map(|r| r.layered.nan_frames).sum();
    let max_strain = results
        .iter()
        .flat_map(|r| r.layered.max_strain.iter().copied())
        .fold(0.0, f64::max);
    let worst_ratio = results
        .iter()
        .map(SpeedResult::strain_ratio)
        .fold(0.0, f64::max);
    let degraded: usize = results.iter().map(|r| r.layered.degraded_frames).sum();
    println!(
        "{{\"preset\":\"{}\",\"layers\":{count},\"gap_m\":{gap},\"depth_m\":{depth},\"frames\":{FRAMES},\"crossings\":{crossings},\"nan_frames\":{nan},\"max_strain\":{max_strain:.6},\"worst_strain_ratio\":{worst_ratio:.4},\"degraded_frames\":{degraded},\"speeds\":{{{}}},\"contact_sheet\":\"{}\"}}",
        preset.name,
        results
            .iter()
            .map(SpeedResult::json)
            .collect::<Vec<_>>()
            .join(","),
        sheet.display()
    );
    Ok(())
}
