//! Mutated scenario files through the scenario runner (`examples/scenario.rs`, included here
//! as a module): every shipped scenario and the corpus's valid ones, with a field renamed, a
//! number turned into NaN, an infinity or a huge value, or a bracket dropped, end either in one
//! `error: ...` line and exit status 1, or in a run whose frames hold no NaN. Never a panic.
#![cfg(feature = "ecs")]

#[path = "../examples/scenario.rs"]
#[allow(dead_code)]
mod runner;

use std::path::{Path, PathBuf};

use proptest::prelude::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The valid files mutated: every shipped scenario (cut to 2 frames; OBJ paths made absolute)
/// and the valid scenarios of the fuzz corpus.
fn seeds() -> Vec<String> {
    let meshes = format!("{}/", root().join("scenarios/meshes").display());
    let mut seeds = Vec::new();
    for dir in ["scenarios", "tests/corpus/scenario_loader"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension().is_some_and(|e| e == "ron")
                    && !p.file_name().unwrap().to_string_lossy().starts_with("bad_")
            })
            .collect();
        paths.sort();
        for p in paths {
            let text = std::fs::read_to_string(&p).unwrap();
            let at = text.find("frames: ").unwrap() + "frames: ".len();
            let digits = text[at..].find(|c: char| !c.is_ascii_digit()).unwrap();
            let short = format!("{}2{}", &text[..at], &text[at + digits..]);
            seeds.push(short.replace("meshes/", &meshes));
        }
    }
    seeds
}

/// Where a file can be mutated: byte ranges of its field names (an identifier followed by a
/// colon) and numbers, and the offsets of its brackets, outside comments and strings.
#[derive(Default)]
struct Sites {
    fields: Vec<(usize, usize)>,
    numbers: Vec<(usize, usize)>,
    brackets: Vec<usize>,
}

fn sites(text: &str) -> Sites {
    let b = text.as_bytes();
    let mut found = Sites::default();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if text[i..].trim_start().starts_with(':') {
                found.fields.push((start, i));
            }
            continue;
        } else if c.is_ascii_digit() || (c == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let start = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b"._-+".contains(&b[i])) {
                i += 1;
            }
            found.numbers.push((start, i));
            continue;
        } else if b"()[]".contains(&c) {
            found.brackets.push(i);
        }
        i += 1;
    }
    found
}

/// Values a number is turned into: not numbers, huge, and ordinary (so that runs happen too).
const ODD_NUMBERS: &[&str] = &[
    "NaN",
    "inf",
    "-inf",
    "1e300",
    "-1e300",
    "1e30",
    "1e9",
    "-1e9",
    "4294967296",
    "0",
    "-0.0",
    "1e-300",
    "0.5",
    "3",
    "-2",
    "100",
];

/// Applies mutation `kind` (0: rename a field, 1: change a number, 2: drop a bracket) at the
/// site picked by `pick`; `None` if the text has no such site.
fn mutate(text: &str, kind: u8, pick: usize, odd: usize) -> Option<String> {
    let Sites {
        fields,
        numbers,
        brackets,
    } = sites(text);
    let mut t = text.to_string();
    match kind {
        0 => {
            let (s, e) = *fields.get(pick % fields.len().max(1))?;
            // A plausible typo: the last two letters swapped, or the last one doubled.
            let mut typo: Vec<char> = text[s..e].chars().collect();
            let n = typo.len();
            if n >= 2 && typo[n - 1] != typo[n - 2] {
                typo.swap(n - 1, n - 2);
            } else {
                typo.push(typo[n - 1]);
            }
            let typo: String = typo.into_iter().collect();
            t.replace_range(s..e, &typo);
        }
        1 => {
            let (s, e) = *numbers.get(pick % numbers.len().max(1))?;
            t.replace_range(s..e, ODD_NUMBERS[odd % ODD_NUMBERS.len()]);
        }
        _ => {
            let at = *brackets.get(pick % brackets.len().max(1))?;
            t.remove(at);
        }
    }
    Some(t)
}

/// Runs the runner on `text` written to a file; returns (exit status, stdout, stderr).
fn run_runner(text: &str, case: u64) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!("isocloth-mutations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("case{case}.ron"));
    std::fs::write(&path, text).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = runner::runner(&[path.display().to_string()], &mut out, &mut err);
    let _ = std::fs::remove_file(&path);
    (
        status,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

/// The runner's verdict on `text` is one of the two allowed.
fn check(text: &str, case: u64) -> Result<(), TestCaseError> {
    let (status, out, err) = run_runner(text, case);
    match status {
        0 => {
            prop_assert!(err.is_empty(), "stderr on success: {err}");
            let json: serde_json::Value =
                serde_json::from_str(out.lines().last().unwrap_or("")).unwrap();
            prop_assert_eq!(json["nan_frames"].as_u64(), Some(0), "{}\n{}", out, text);
        }
        1 => {
            prop_assert_eq!(err.lines().count(), 1, "{}", err);
            prop_assert!(err.starts_with("error: "), "{}", err);
            prop_assert!(
                !err.contains("internal failure"),
                "a panic: {}\n{}",
                err,
                text
            );
        }
        s => prop_assert!(false, "exit status {s}: {err}"),
    }
    Ok(())
}

/// Every unmutated seed runs (status 0, no NaN).
#[test]
fn seeds_run() {
    for (k, seed) in seeds().iter().enumerate() {
        let (status, out, err) = run_runner(seed, 1_000_000 + k as u64);
        assert_eq!(status, 0, "{err}\n{seed}");
        assert!(out.contains("\"nan_frames\":0"), "{out}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// One or two mutations of a valid scenario: an error line and status 1, or a clean run.
    #[test]
    fn mutated_scenarios_fail_cleanly_or_run_without_nan(
        seed in any::<prop::sample::Index>(),
        mutations in prop::collection::vec((0u8..3, any::<usize>(), any::<usize>()), 1..=2),
        case in any::<u64>(),
    ) {
        let seeds = seeds();
        let mut text = seeds[seed.index(seeds.len())].clone();
        for (kind, pick, odd) in mutations {
            if let Some(t) = mutate(&text, kind, pick, odd) {
                text = t;
            }
        }
        check(&text, case)?;
    }
}
