//! Strict settings files: every serde type a user writes refuses unknown fields in every struct
//! and struct variant, and says where. The walk takes one valid file per type, inserts a
//! misspelt field at the front of each struct written in it, one at a time, and checks that the
//! error names the field and the line and column where it was inserted. A list of every struct
//! and struct variant users write keeps the walk complete.
#![cfg(feature = "ecs")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use isocloth::ecs::{BudgetPreset, ClothConfig};
use isocloth::load;
use isocloth::rig::Animation;
use isocloth::{
    Aerodynamics, AttachmentSettings, BaseMesh, ContactSettings, Influence, Material,
    SolverSettings, SolverWeights,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Parses `text` as `T` through [`load::ron`], keeping only the error's text.
fn strict<T: serde::de::DeserializeOwned>(text: &str) -> Result<(), String> {
    load::ron::<T>(text).map(|_| ()).map_err(|e| e.to_string())
}

/// Loads scenario text (OBJ paths resolve against the OBJ corpus), without running it.
fn scenario(text: &str) -> Result<(), String> {
    isocloth::scenario::load(text, &root().join("tests/corpus/obj_loader"))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A loader: `Err` with the error's text.
type Loader = fn(&str) -> Result<(), String>;

/// One valid file of each type users write, with the loader they go through.
fn files() -> Vec<(&'static str, String, Loader)> {
    let read = |path: &str| std::fs::read_to_string(root().join(path)).unwrap();
    vec![
        (
            "scenario, every struct",
            read("tests/corpus/scenario_loader/ok_every_struct.ron"),
            scenario,
        ),
        (
            "scenario, disc",
            "(name: \"disc\", mesh: Disc(radius: 0.5, rings: 3, segments: 8), frames: 1)".into(),
            scenario,
        ),
        (
            "scenario, OBJ",
            "(name: \"obj\", mesh: Obj(path: \"seam_duplicated_vertices.obj\", keep_open: [6, 7]),\n frames: 1)"
                .into(),
            scenario,
        ),
        ("shipped scenario", read("scenarios/cape_run.ron"), scenario),
        ("shipped preset", read("presets/desktop.ron"), |t| {
            BudgetPreset::from_ron(t).map(|_| ()).map_err(|e| e.to_string())
        }),
        (
            "configuration",
            r#"(
    budget: (name: "phone", substeps: 1, iterations: 5, method: Anderson(history: 2)),
    timestep: 0.02,
    gravity: (0.0, -9.81, 0.0),
    contact: (thickness: 0.01, friction: 0.5),
    aero: (wind: (1.0, 0.0, 0.0), drag: 1.0, lift: 0.5),
    collider_teleport_distance: 2.0,
)"#
            .into(),
            |t| ClothConfig::from_ron(t).map(|_| ()).map_err(|e| e.to_string()),
        ),
        (
            "contact settings",
            "(thickness: 0.01, friction: 0.4, enabled: true, max_depenetration_speed: 1.0)".into(),
            strict::<ContactSettings>,
        ),
        (
            "air",
            "(wind: (0.0, 0.0, 5.0), air_density: 1.2, drag: 1.0, lift: 0.5, damping: 0.1)".into(),
            strict::<Aerodynamics>,
        ),
        (
            "attachment settings",
            "(linear_inertia: 0.8, angular_inertia: 0.6, teleport_distance: 1.0)".into(),
            strict::<AttachmentSettings>,
        ),
        (
            "material",
            "(density: 0.2, bending_stiffness: 1e-4,\n bending_rest: Curved)".into(),
            strict::<Material>,
        ),
        (
            "solver weights",
            "(isometry: 3e3, conformity_ratio: 1e3,\n render_edge: 1e3)".into(),
            strict::<SolverWeights>,
        ),
        (
            "solver settings",
            "(frame_time: 0.02, substeps: 2, iterations: 5, catch_up_frames: 2,\n integrator: Bdf2, method: Newton, gravity: (0.0, -9.81, 0.0))"
                .into(),
            strict::<SolverSettings>,
        ),
        (
            "base mesh",
            "(positions: [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)],\n triangles: [(0, 1, 2)], pattern: None)"
                .into(),
            strict::<BaseMesh>,
        ),
        (
            "skin influence",
            "(bone: 2, weight: 0.5)".into(),
            strict::<Influence>,
        ),
        ("animation", "Spin(rate: 2.0)".into(), strict::<Animation>),
    ]
}

/// Byte offsets just inside every `(` that opens a struct with named fields (an identifier and
/// a colon follow it), skipping comments and strings.
fn struct_openings(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += 1 + usize::from(b[i] == b'\\');
                }
            }
            b'(' => {
                let rest = text[i + 1..].trim_start();
                let ident: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let after = rest[ident.len()..].trim_start();
                if ident.starts_with(|c: char| c.is_ascii_alphabetic())
                    && after.starts_with(':')
                    && !after.starts_with("::")
                {
                    out.push(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Line and column (from 1) of byte `at`.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |k| k + 1) + 1;
    (line, column)
}

/// Every struct and struct variant users write, as serde names them in errors. Adding a user
/// type (or a struct variant) to the crate means adding it here and a file to [`files`].
const EVERY_STRUCT: &[&str] = &[
    // Scenario files.
    "Scenario",
    "Rectangle",
    "Disc",
    "Obj",
    "Placement",
    "Box",
    "ColliderSpec",
    "Capsule",
    "Sphere",
    "Static",
    "CharacterSpec",
    "Spin",
    // Presets and configuration.
    "BudgetPreset",
    "Anderson",
    "ClothConfig",
    "ContactSettings",
    "Aerodynamics",
    "AttachmentSettings",
    "Material",
    "SolverSettings",
    "SolverWeights",
    // Meshes and skinning data.
    "BaseMesh",
    "Influence",
];

/// For each type's valid file and each struct written in it, one misspelt field inserted at
/// its front is refused with an error that names the field and the line:column of the
/// insertion. Every entry of [`EVERY_STRUCT`] is met, and the valid files themselves load.
#[test]
fn every_struct_refuses_a_misspelt_field_where_it_is() {
    let mut met = BTreeSet::new();
    for (what, text, parse) in files() {
        parse(&text).unwrap_or_else(|e| panic!("{what}: the valid file is refused: {e}"));
        let openings = struct_openings(&text);
        assert!(!openings.is_empty(), "{what}");
        for at in openings {
            let mutated = format!("{}misspelt_field: 0, {}", &text[..at], &text[at..]);
            let (line, column) = position(&mutated, at);
            let err = parse(&mutated)
                .err()
                .unwrap_or_else(|| panic!("{what}: misspelt field at {line}:{column} accepted"));
            assert!(
                err.contains("misspelt_field") && err.contains(&format!("{line}:{column}")),
                "{what}: {err:?} does not name the field at {line}:{column}"
            );
            let outer = err
                .split("in `")
                .nth(1)
                .and_then(|s| s.split('`').next())
                .unwrap_or_else(|| panic!("{what}: {err:?} names no struct"));
            met.insert(outer.to_string());
        }
    }
    let every: BTreeSet<String> = EVERY_STRUCT.iter().map(|s| s.to_string()).collect();
    assert_eq!(met, every);
}

/// The issue's three misspellings, each refused with the line:column of the misspelt field and
/// the path of fields to it: `mx` beside `min` and `max` in a pin box, `rotation` in a static
/// motion, `colour` in a rectangle mesh.
#[test]
fn the_issues_misspellings_are_refused() {
    let cases = [
        (
            "pins: Box(min: (0.0, 0.0, 0.0), mx: (1.0, 1.0, 1.0))",
            "mx:",
            "pins.Box.mx",
        ),
        (
            "colliders: [(shape: Plane,\n motion: Static(translation: (0.0, 0.0, 0.0), rotation: (0.0, 0.0, 0.0)))]",
            "rotation:",
            "colliders[0].motion.Static.rotation",
        ),
        (
            "mesh: Rectangle(width: 1.0, height: 1.0, cells_x: 2, cells_y: 2, colour: 3)",
            "colour:",
            "mesh.Rectangle.colour",
        ),
    ];
    for (field, misspelt, path) in cases {
        let mesh = if field.starts_with("mesh") {
            ""
        } else {
            "mesh: Rectangle(width: 1.0, height: 1.0, cells_x: 2, cells_y: 2),"
        };
        let text = format!("(name: \"x\", {mesh}\n{field},\nframes: 1)");
        let (line, column) = position(&text, text.find(misspelt).unwrap());
        let err = scenario(&text).unwrap_err();
        assert!(
            err.starts_with(&format!("{line}:{column}: {path}: ")),
            "{err:?} is not at {line}:{column} {path}"
        );
    }
}

/// Values refused for what they are (not their syntax) carry the line:column of the value and
/// its path of fields where RON gives them, and the path of fields where the check needs the
/// built mesh.
#[test]
fn semantic_errors_point_at_the_value() {
    let rect = "mesh: Rectangle(width: 1.0, height: 1.0, cells_x: 2, cells_y: 2)";
    let cases = [
        (
            format!(
                "(name: \"x\", {rect},\npins: Box(min: (NaN, 0.0, 0.0), max: (1.0, 1.0, 1.0)),\nframes: 1)"
            ),
            "2:",
            "pins.Box.min: ",
        ),
        (
            format!(
                "(name: \"x\", {rect},\ncolliders: [(shape: Plane, motion: Static(translation: (0.0, 0.0, 0.0))),\n (shape: Sphere(radius: -1.0), motion: Static(translation: (0.0, 0.0, 0.0)))],\nframes: 1)"
            ),
            "3:",
            "colliders[1].shape: ",
        ),
        (
            format!("(name: \"x\", {rect},\ncontact: (friction: 20.0),\nframes: 1)"),
            "2:",
            "contact: ",
        ),
        (
            format!(
                "(name: \"x\", {rect},\n budget: Custom((name: \"b\", substeps: 1, iterations: 0, method: LocalGlobal)),\nframes: 1)"
            ),
            "2:",
            "budget.Custom.iterations: ",
        ),
        (
            format!("(name: \"x\", {rect}, pins: Vertices([0, 99]), frames: 1)"),
            "",
            "pins.Vertices[1]: ",
        ),
    ];
    for (text, line, path) in cases {
        let err = scenario(&text).unwrap_err();
        assert!(
            err.starts_with(line) && err.contains(path),
            "{err:?} lacks {line:?} or {path:?}"
        );
    }
}

/// Snapshots' envelope (`ClothSnapshot`, `ClothState`, read from JSON) refuses an unknown field
/// at either level, naming it.
#[test]
fn snapshot_envelope_refuses_a_misspelt_field() {
    let cloth = isocloth::Cloth::from_mesh(
        isocloth::ClothMesh::new(&BaseMesh::rectangle(0.2, 0.2, 2, 2).unwrap()).unwrap(),
        Material::default(),
        &[],
        SolverSettings::default(),
    )
    .unwrap();
    let json = serde_json::to_string(&cloth.snapshot()).unwrap();
    for at in ["{", "\"state\":{"] {
        let mutated = json.replacen(at, &format!("{at}\"misspelt_field\":0,"), 1);
        let refused = serde_json::from_str::<isocloth::ClothSnapshot>(&mutated)
            .err()
            .is_some_and(|e| e.to_string().contains("misspelt_field"));
        assert!(refused, "a misspelt field after {at:?} is accepted");
    }
}

/// `SolverSettings::method` written directly (not through a preset) refuses an unknown field
/// in `Anderson(...)`, naming it.
#[test]
fn solver_settings_method_refuses_a_misspelt_field() {
    let refused = load::ron::<SolverSettings>("(method: Anderson(history: 5, histroy: 3))")
        .err()
        .is_some_and(|e| e.to_string().contains("histroy"));
    assert!(refused, "a misspelt field in Anderson is accepted");
}

/// A preset file that names the quasi-Newton method the crate had until 2026-11-28 is refused
/// with an error that names the method and the ones there are.
#[test]
fn a_removed_method_is_refused_by_name() {
    let error = BudgetPreset::from_ron(
        r#"(name: "console", substeps: 2, iterations: 5, method: Lbfgs(history: 5))"#,
    )
    .expect_err("a removed method is accepted");
    let text = error.to_string();
    assert!(
        text.contains("Lbfgs") && text.contains("Anderson"),
        "{text}"
    );
}

/// A material that still names one of the weights that became the solver's is refused, and
/// the error says where the weight went (`weights: (isometry: ...)` in the preset), not only
/// that the field is unknown.
#[test]
fn a_material_naming_an_old_weight_says_where_it_went() {
    for (old, new) in [
        ("stretch_stiffness", "isometry"),
        ("conformity_ratio", "conformity_ratio"),
        ("render_edge_stiffness", "render_edge"),
    ] {
        let err = strict::<Material>(&format!("(density: 0.3, {old}: 1e4)")).unwrap_err();
        assert!(
            err.contains(old) && err.contains(&format!("weights: ({new}:")),
            "{old}: {err}"
        );
    }
}

/// A cloth given other weights steps on a model factored for them (the weights live in the
/// factored matrix), and `set_model` refuses a model factored for other weights.
#[test]
fn other_weights_refactor_and_a_model_for_other_weights_is_refused() {
    let mesh = isocloth::ClothMesh::new(&BaseMesh::rectangle(0.2, 0.2, 2, 2).unwrap()).unwrap();
    let mut cloth =
        isocloth::Cloth::from_mesh(mesh, Material::default(), &[], SolverSettings::default())
            .unwrap();
    let stiff = cloth.model().clone();
    let soft = SolverSettings {
        weights: SolverWeights::SOFT,
        ..SolverSettings::default()
    };
    cloth.set_settings(soft).unwrap();
    assert_eq!(cloth.model().settings().weights, SolverWeights::SOFT);
    assert!(!std::sync::Arc::ptr_eq(cloth.model(), &stiff));
    assert!(cloth.set_model(stiff, soft).is_err());
}
