//! A small software renderer for the examples' pictures: cloth triangles shaded by a fixed light,
//! kinematic bodies (capsules and spheres) as round-capped strokes, an optional ground grid, all
//! in perspective and painted far to near with tiny-skia. Used by `cape` and `contact_gallery`.

use glam::{DMat4, DQuat, DVec3, DVec4, Vec3};
use isocloth::{ColliderShape, Pose};
use tiny_skia::{Color, FillRule, LineCap, Paint, PathBuilder, Pixmap, Stroke, Transform};

/// A pinhole camera.
pub struct Camera {
    /// Where it is.
    pub eye: DVec3,
    view_proj: DMat4,
    /// Vertical field of view in radians.
    fov_y: f64,
    width: f64,
    height: f64,
}

impl Camera {
    /// A camera at `eye` looking at `target` (world +Y up) with a vertical field of view of
    /// `fov_y` radians, for a picture of `width` x `height` pixels.
    pub fn look_at(eye: DVec3, target: DVec3, fov_y: f64, width: u32, height: u32) -> Self {
        let view = glam::dcamera::rh::view::look_at_mat4(eye, target, DVec3::Y);
        let proj = glam::dcamera::rh::proj::directx::perspective(
            fov_y,
            width as f64 / height as f64,
            0.05,
            50.0,
        );
        Self {
            eye,
            view_proj: proj * view,
            fov_y,
            width: width as f64,
            height: height as f64,
        }
    }

    /// The `cape` demo's camera: following the character from behind and to its side.
    pub fn following(target: DVec3, heading: f64, width: u32, height: u32) -> Self {
        let back = DQuat::from_rotation_y(heading) * DVec3::new(1.6, 0.9, -2.6);
        Self::look_at(target + back, target, 0.8, width, height)
    }

    /// Pixel coordinates and depth, or none behind the camera.
    fn project(&self, p: DVec3) -> Option<(f32, f32, f64)> {
        let c = self.view_proj * DVec4::new(p.x, p.y, p.z, 1.0);
        if c.w <= 1e-6 {
            return None;
        }
        let (x, y) = (c.x / c.w, c.y / c.w);
        Some((
            ((x * 0.5 + 0.5) * self.width) as f32,
            ((0.5 - y * 0.5) * self.height) as f32,
            c.w,
        ))
    }

    /// Pixels per metre at depth `depth`.
    fn scale_at(&self, depth: f64) -> f64 {
        (self.height / (2.0 * (0.5 * self.fov_y).tan())) / depth
    }
}

/// A square grid on the ground plane y = 0.
pub struct Grid {
    /// The grid is centred on this point's x and z, snapped to whole cells.
    pub center: DVec3,
    /// The ground's height (m).
    pub height: f64,
    /// Side of one cell in metres.
    pub spacing: f64,
    /// Lines on each side of the centre.
    pub lines: i32,
}

/// What to draw besides the cloth and the bodies.
pub struct Style {
    /// A ground grid, if any.
    pub ground: Option<Grid>,
    /// Whether to stroke each body's outline over everything, so that bodies stay visible
    /// under the cloth.
    pub body_outlines: bool,
    /// Whether to sort each body by the depth of its far side rather than its centre, so that
    /// cloth lying on it is painted over it (for cloth draped over bodies seen from outside;
    /// the cape, seen from behind the character, sorts by centre).
    pub far_body_depth: bool,
}

enum Shape {
    Triangle([(f32, f32); 3], Color),
    Capsule((f32, f32), (f32, f32), f32, Color),
    Line((f32, f32), (f32, f32), Color),
}

/// Draws one frame: ground grid, bodies and the cloth (render positions and triangle indices),
/// far to near; then, if asked, the bodies' outlines on top. Planes among `bodies` are not
/// drawn (use a ground grid).
#[allow(dead_code)]
pub fn render(
    cam: &Camera,
    positions: &[Vec3],
    indices: &[u32],
    bodies: &[(ColliderShape, Pose)],
    style: &Style,
    width: u32,
    height: u32,
) -> Pixmap {
    render_with_skin(cam, positions, indices, None, bodies, style, width, height)
}

/// One cloth to draw: render positions, triangle indices and, if given, one colour for both
/// sides (the lining darker) instead of the cape's red and gold.
pub struct ClothDraw<'a> {
    pub positions: &'a [Vec3],
    pub indices: &'a [u32],
    pub tint: Option<(f64, f64, f64)>,
}

/// [`render`] with a skinned body mesh (positions and triangle indices), drawn in grey and
/// depth-sorted with the cloth.
#[allow(clippy::too_many_arguments, dead_code)]
pub fn render_with_skin(
    cam: &Camera,
    positions: &[Vec3],
    indices: &[u32],
    skin: Option<(&[Vec3], &[u32])>,
    bodies: &[(ColliderShape, Pose)],
    style: &Style,
    width: u32,
    height: u32,
) -> Pixmap {
    let cloth = ClothDraw {
        positions,
        indices,
        tint: None,
    };
    render_cloths(cam, &[cloth], skin, bodies, style, width, height)
}

/// [`render_with_skin`] with any number of cloths, each with its own colour if it has one.
#[allow(clippy::too_many_arguments, dead_code)]
pub fn render_cloths(
    cam: &Camera,
    cloths: &[ClothDraw<'_>],
    skin: Option<(&[Vec3], &[u32])>,
    bodies: &[(ColliderShape, Pose)],
    style: &Style,
    width: u32,
    height: u32,
) -> Pixmap {
    let mut pixmap = Pixmap::new(width, height).expect("nonzero size");
    pixmap.fill(Color::from_rgba8(236, 240, 245, 255));
    let mut shapes: Vec<(f64, Shape)> = Vec::new();
    if let Some(grid) = &style.ground {
        let s = grid.spacing;
        let (gx, gz) = (
            (grid.center.x / s).round() * s,
            (grid.center.z / s).round() * s,
        );
        let half = grid.lines as f64 * s;
        for k in -grid.lines..=grid.lines {
            let k = k as f64 * s;
            for (a, b) in [
                (
                    DVec3::new(gx + k, grid.height, gz - half),
                    DVec3::new(gx + k, grid.height, gz + half),
                ),
                (
                    DVec3::new(gx - half, grid.height, gz + k),
                    DVec3::new(gx + half, grid.height, gz + k),
                ),
            ] {
                if let (Some(p), Some(q)) = (cam.project(a), cam.project(b)) {
                    shapes.push((
                        1e9,
                        Shape::Line(
                            (p.0, p.1),
                            (q.0, q.1),
                            Color::from_rgba8(200, 205, 215, 255),
                        ),
                    ));
                }
            }
        }
    }
    let light = DVec3::new(0.4, 0.8, -0.45).normalize();
    let mut outlines = Vec::new();
    for (shape, pose) in bodies {
        let Some((a, b, r)) = body_segment(shape, pose) else {
            continue;
        };
        if let (Some(p), Some(q)) = (cam.project(a), cam.project(b)) {
            let depth = 0.5 * (p.2 + q.2);
            let width = (2.0 * r * cam.scale_at(depth)) as f32;
            let sort_depth = if style.far_body_depth {
                p.2.max(q.2) + r
            } else {
                depth
            };
            let axis = (b - a).normalize_or(DVec3::Y);
            let shade = 0.55 + 0.35 * axis.cross(light).length();
            let g = (150.0 * shade) as u8;
            shapes.push((
                sort_depth,
                Shape::Capsule(
                    (p.0, p.1),
                    (q.0, q.1),
                    width,
                    Color::from_rgba8(g / 2, g, (g as f32 * 1.3).min(255.0) as u8, 255),
                ),
            ));
            outlines.push(((p.0, p.1), (q.0, q.1), width));
        }
    }
    for (shape, pose) in bodies {
        for [a, b, c] in body_triangles(shape)
            .into_iter()
            .flat_map(|t| split(t, 0.08))
            .map(|t| t.map(|v| pose.transform_point(v)))
        {
            let n = (b - a).cross(c - a).normalize_or(DVec3::Y);
            let (Some(p), Some(q), Some(r)) = (cam.project(a), cam.project(b), cam.project(c))
            else {
                continue;
            };
            let g = 0.55 + 0.4 * n.dot(light).abs();
            shapes.push((
                (p.2 + q.2 + r.2) / 3.0,
                Shape::Triangle(
                    [(p.0, p.1), (q.0, q.1), (r.0, r.1)],
                    Color::from_rgba8((75.0 * g) as u8, (150.0 * g) as u8, (195.0 * g) as u8, 255),
                ),
            ));
        }
    }
    for cloth in cloths {
        let positions = cloth.positions;
        for t in cloth.indices.chunks_exact(3) {
            let [a, b, c] = [t[0], t[1], t[2]].map(|i| positions[i as usize].as_dvec3());
            let n = (b - a).cross(c - a).normalize_or(DVec3::Y);
            let (Some(p), Some(q), Some(r)) = (cam.project(a), cam.project(b), cam.project(c))
            else {
                continue;
            };
            let lit = 0.35 + 0.65 * n.dot(light).abs();
            // One side red, the other gold (for the cape, the mesh's normals point at the
            // wearer's back: the side seen from behind them is the red outside, the other the
            // lining).
            let centroid = (a + b + c) / 3.0;
            let outside = n.dot(cam.eye - centroid) < 0.0;
            let (cr, cg, cb) = match (cloth.tint, outside) {
                (Some(t), true) => t,
                (Some((r, g, b)), false) => (0.7 * r, 0.7 * g, 0.7 * b),
                (None, true) => (190.0, 40.0, 45.0),
                (None, false) => (200.0, 160.0, 60.0),
            };
            let color =
                Color::from_rgba8((cr * lit) as u8, (cg * lit) as u8, (cb * lit) as u8, 255);
            shapes.push((
                (p.2 + q.2 + r.2) / 3.0,
                Shape::Triangle([(p.0, p.1), (q.0, q.1), (r.0, r.1)], color),
            ));
        }
    }
    if let Some((skin_positions, skin_indices)) = skin {
        for t in skin_indices.chunks_exact(3) {
            let [a, b, c] = [t[0], t[1], t[2]].map(|i| skin_positions[i as usize].as_dvec3());
            let n = (b - a).cross(c - a).normalize_or(DVec3::Y);
            let (Some(p), Some(q), Some(r)) = (cam.project(a), cam.project(b), cam.project(c))
            else {
                continue;
            };
            let g = (120.0 + 110.0 * n.dot(light).abs()) as u8;
            shapes.push((
                (p.2 + q.2 + r.2) / 3.0,
                Shape::Triangle(
                    [(p.0, p.1), (q.0, q.1), (r.0, r.1)],
                    Color::from_rgba8(g, g, (g as f32 * 1.05).min(255.0) as u8, 255),
                ),
            ));
        }
    }
    shapes.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut paint = Paint {
        anti_alias: true,
        ..Default::default()
    };
    for (_, shape) in shapes {
        match shape {
            Shape::Triangle(v, color) => {
                let mut pb = PathBuilder::new();
                pb.move_to(v[0].0, v[0].1);
                pb.line_to(v[1].0, v[1].1);
                pb.line_to(v[2].0, v[2].1);
                pb.close();
                if let Some(path) = pb.finish() {
                    paint.set_color(color);
                    pixmap.fill_path(
                        &path,
                        &paint,
                        FillRule::Winding,
                        Transform::identity(),
                        None,
                    );
                    // A hairline of the same colour closes the seams between triangles.
                    let stroke = Stroke {
                        width: 0.6,
                        ..Default::default()
                    };
                    pixmap.stroke_path(&path, &paint, &stroke, Transform::identity(), None);
                }
            }
            Shape::Capsule(a, b, width, color) => stroke_segment(&mut pixmap, a, b, width, color),
            Shape::Line(a, b, color) => stroke_segment(&mut pixmap, a, b, 1.0, color),
        }
    }
    if style.body_outlines {
        for (a, b, width) in outlines {
            outline_segment(&mut pixmap, a, b, width);
        }
    }
    pixmap
}

/// A body's axis segment (both ends the centre for a sphere) and radius, in world space; none
/// for a plane.
fn body_segment(shape: &ColliderShape, pose: &Pose) -> Option<(DVec3, DVec3, f64)> {
    match *shape {
        ColliderShape::Capsule {
            half_height,
            radius,
        } => Some((
            pose.transform_point(DVec3::new(0.0, -half_height, 0.0)),
            pose.transform_point(DVec3::new(0.0, half_height, 0.0)),
            radius,
        )),
        ColliderShape::Sphere { radius } => Some((pose.translation, pose.translation, radius)),
        ColliderShape::TaperedCapsule {
            half_height,
            bottom_radius,
            top_radius,
        } => Some((
            pose.transform_point(DVec3::new(0.0, -half_height, 0.0)),
            pose.transform_point(DVec3::new(0.0, half_height, 0.0)),
            0.5 * (bottom_radius + top_radius),
        )),
        _ => None,
    }
}

/// `t` split into four until no edge is longer than `max` (so that a large face sorts by depth
/// with the cloth lying on it).
fn split(t: [DVec3; 3], max: f64) -> Vec<[DVec3; 3]> {
    let [a, b, c] = t;
    if a.distance(b).max(b.distance(c)).max(c.distance(a)) <= max {
        return vec![t];
    }
    let (ab, bc, ca) = ((a + b) / 2.0, (b + c) / 2.0, (c + a) / 2.0);
    [[a, ab, ca], [ab, b, bc], [ca, bc, c], [ab, bc, ca]]
        .into_iter()
        .flat_map(|t| split(t, max))
        .collect()
}

/// The triangles drawn for a body that is not a segment (local frame): boxes, cylinders,
/// hulls, meshes and height fields.
fn body_triangles(shape: &ColliderShape) -> Vec<[DVec3; 3]> {
    let quad = |a: DVec3, b: DVec3, c: DVec3, d: DVec3| [[a, b, c], [a, c, d]];
    match shape {
        ColliderShape::Cuboid { half_extents: e } => {
            let v = |i: usize| {
                DVec3::new(
                    if i & 1 == 0 { -e.x } else { e.x },
                    if i & 2 == 0 { -e.y } else { e.y },
                    if i & 4 == 0 { -e.z } else { e.z },
                )
            };
            [
                [0, 2, 3, 1],
                [4, 5, 7, 6],
                [0, 1, 5, 4],
                [2, 6, 7, 3],
                [0, 4, 6, 2],
                [1, 3, 7, 5],
            ]
            .iter()
            .flat_map(|f| quad(v(f[0]), v(f[1]), v(f[2]), v(f[3])))
            .collect()
        }
        ColliderShape::Cylinder {
            half_height: h,
            radius: r,
        } => {
            let k = 24;
            let rim = |i: usize, y: f64| {
                let a = std::f64::consts::TAU * i as f64 / k as f64;
                DVec3::new(r * a.cos(), y, r * a.sin())
            };
            (0..k)
                .flat_map(|i| {
                    let (a0, a1, b0, b1) = (rim(i, -h), rim(i + 1, -h), rim(i, *h), rim(i + 1, *h));
                    let [s0, s1] = quad(a0, a1, b1, b0);
                    [s0, s1, [DVec3::Y * *h, b0, b1], [DVec3::Y * -h, a1, a0]]
                })
                .collect()
        }
        ColliderShape::ConvexHull(hull) => hull.triangles().to_vec(),
        ColliderShape::TriMesh(mesh) => mesh
            .triangles()
            .iter()
            .map(|t| t.map(|i| mesh.vertices()[i as usize]))
            .collect(),
        ColliderShape::HeightField(field) => {
            let (rows, cols, size) = (field.rows(), field.columns(), field.size());
            let v = |r: usize, c: usize| {
                DVec3::new(
                    -0.5 * size.x + size.x * c as f64 / (cols - 1) as f64,
                    field.heights()[r * cols + c],
                    -0.5 * size.y + size.y * r as f64 / (rows - 1) as f64,
                )
            };
            (0..rows - 1)
                .flat_map(|r| (0..cols - 1).map(move |c| (r, c)))
                .flat_map(|(r, c)| quad(v(r, c), v(r + 1, c), v(r + 1, c + 1), v(r, c + 1)))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The path of a segment from `a` to `b` (nudged so that a point, a sphere, still has a
/// direction for its round caps).
fn segment_path(a: (f32, f32), b: (f32, f32)) -> Option<tiny_skia::Path> {
    let mut pb = PathBuilder::new();
    pb.move_to(a.0, a.1);
    pb.line_to(b.0 + 0.01, b.1);
    pb.finish()
}

fn round_stroke(width: f32) -> Stroke {
    Stroke {
        width: width.max(1.0),
        line_cap: LineCap::Round,
        ..Default::default()
    }
}

/// A segment with round caps (a capsule seen from the side, or a grid line).
fn stroke_segment(pixmap: &mut Pixmap, a: (f32, f32), b: (f32, f32), width: f32, color: Color) {
    if let Some(path) = segment_path(a, b) {
        let mut paint = Paint {
            anti_alias: true,
            ..Default::default()
        };
        paint.set_color(color);
        pixmap.stroke_path(
            &path,
            &paint,
            &round_stroke(width),
            Transform::identity(),
            None,
        );
    }
}

/// The outline of [`stroke_segment`]'s shape: a thin dark line around it.
fn outline_segment(pixmap: &mut Pixmap, a: (f32, f32), b: (f32, f32), width: f32) {
    let Some(outline) = segment_path(a, b).and_then(|p| p.stroke(&round_stroke(width), 1.0)) else {
        return;
    };
    let mut paint = Paint {
        anti_alias: true,
        ..Default::default()
    };
    paint.set_color(Color::from_rgba8(20, 60, 90, 220));
    let thin = Stroke {
        width: 1.2,
        ..Default::default()
    };
    pixmap.stroke_path(&outline, &paint, &thin, Transform::identity(), None);
}

/// Lays `tiles` (all of one size) out in rows of `columns` and saves them as one PNG at `path`:
/// an example's contact sheet.
#[allow(dead_code)]
pub fn save_sheet(
    tiles: &[Pixmap],
    columns: u32,
    path: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let (w, h) = tiles.first().map_or((1, 1), |t| (t.width(), t.height()));
    let rows = (tiles.len() as u32).div_ceil(columns).max(1);
    let mut sheet = Pixmap::new(w * columns, h * rows).ok_or("empty contact sheet")?;
    for (k, tile) in tiles.iter().enumerate() {
        let (x, y) = ((k as u32 % columns) * w, (k as u32 / columns) * h);
        sheet.draw_pixmap(
            x as i32,
            y as i32,
            tile.as_ref(),
            &tiny_skia::PixmapPaint::default(),
            Transform::identity(),
            None,
        );
    }
    sheet.save_png(path)?;
    Ok(())
}
