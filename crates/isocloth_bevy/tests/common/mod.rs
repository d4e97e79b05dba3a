//! Helpers shared by the plugin crate's tests.

pub mod gltf;

/// An App with the plugin (at its default, console, budget), one fixed tick per update.
pub fn plugin_app() -> bevy_app::App {
    let mut app = bevy_app::App::new();
    app.add_plugins((
        isocloth_bevy::HeadlessPlugins,
        isocloth_bevy::IsoclothPlugin::default(),
    ))
    .insert_resource(bevy_time::TimeUpdateStrategy::ManualDuration(
        std::time::Duration::from_secs_f64(1.0 / 60.0),
    ));
    app
}
