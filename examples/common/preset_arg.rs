//! `--preset NAME`: a shipped budget preset by name, a rung `SxI`, or a preset file (as `tune`
//! writes).

use isocloth::SolverMethod;
use isocloth::ecs::BudgetPreset;
use isocloth::model::SolverSettings;

/// `mobile`, `console`, `desktop`, `console-soft` (the console's budget at
/// `SolverWeights::SOFT`) or `reference` (the converged inextensible cloth,
/// `presets/reference.ron`); `SxI` (`8x10`: S substeps x I iterations of the accelerated
/// local-global map, Anderson history 5, at the default weights, as the tuner's ladder); else
/// `name` read as a preset file (RON).
pub fn preset_named(name: &str) -> Result<BudgetPreset, String> {
    if let Some((substeps, iterations)) = rung_of(name) {
        if !(1..=SolverSettings::MAX_SUBSTEPS).contains(&substeps)
            || !(1..=SolverSettings::MAX_ITERATIONS).contains(&iterations)
        {
            return Err(format!(
                "{name:?}: substeps 1-{} and iterations 1-{} are supported",
                SolverSettings::MAX_SUBSTEPS,
                SolverSettings::MAX_ITERATIONS
            ));
        }
        return Ok(BudgetPreset {
            name: name.into(),
            substeps,
            iterations,
            method: SolverMethod::Anderson { history: 5 },
            strain_cap: Default::default(),
            weights: Default::default(),
        });
    }
    match name {
        "mobile" => Ok(BudgetPreset::mobile()),
        "console" => Ok(BudgetPreset::console()),
        "desktop" => Ok(BudgetPreset::desktop()),
        "reference" => Ok(BudgetPreset::reference()),
        "console-soft" => Ok(BudgetPreset {
            name: "console-soft".into(),
            weights: isocloth::SolverWeights::SOFT,
            ..BudgetPreset::console()
        }),
        file => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                format!("--preset {file:?}: not mobile, console, desktop, console-soft, reference or SxI, and not a readable preset file ({e})")
            })?;
            BudgetPreset::from_ron(&text).map_err(|e| format!("{file}: {e}"))
        }
    }
}

/// `SxI` as two whole numbers, if `s` is written so.
fn rung_of(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once('x')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}
