//! `--preset NAME`: a shipped budget preset by name, or a preset file (as `tune` writes).

use isocloth::ecs::BudgetPreset;

/// `mobile`, `console` or `desktop`, else `name` read as a preset file (RON).
pub fn preset_named(name: &str) -> Result<BudgetPreset, String> {
    match name {
        "mobile" => Ok(BudgetPreset::mobile()),
        "console" => Ok(BudgetPreset::console()),
        "desktop" => Ok(BudgetPreset::desktop()),
        file => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                format!("--preset {file:?}: not mobile, console or desktop, and not a readable preset file ({e})")
            })?;
            BudgetPreset::from_ron(&text).map_err(|e| format!("{file}: {e}"))
        }
    }
}
