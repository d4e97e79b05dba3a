//! Reading settings files (RON) with errors that point at the line.
//!
//! [`ron()`] parses any of the crate's serde types ([`crate::Material`],
//! [`crate::ContactSettings`], [`crate::Aerodynamics`], [`crate::AttachmentSettings`], the ECS
//! layer's presets and configuration, scenarios) and, on failure, gives a [`RonError`] with
//! the line and column of the value at fault and its path of fields
//! (`colliders[2].shape.Sphere.radius`). Every one of those types refuses fields it does not
//! know, in structs and in enum variants alike: a misspelt setting is an error, never a
//! silently kept default.

use serde::de::DeserializeOwned;

use crate::error::RonError;

/// Parses RON text into `T`; errors carry the position and the field path of the value at
/// fault.
pub fn ron<T: DeserializeOwned>(text: &str) -> Result<T, RonError> {
    let mut de = ::ron::Deserializer::from_str(text).map_err(|e| RonError::new(e, ""))?;
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        // Segments the tracker could not name show as `?`; the position says where anyway.
        let path = e.path().to_string();
        let known = path.split(".?").next().unwrap_or("");
        let path = if known == "." || known == "?" {
            ""
        } else {
            known
        }
        .to_string();
        RonError::new(de.span_error(e.into_inner()), path)
    })?;
    de.end().map_err(|e| RonError::new(de.span_error(e), ""))?;
    Ok(value)
}

#[cfg(feature = "ecs")]
pub(crate) use checks::*;

/// Checks run while a value is read, for the loaders of the ECS layer and of scenarios.
#[cfg(feature = "ecs")]
mod checks {
    use glam::DVec3;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer};

    /// A value that knows whether it makes sense, checked as it is read so that a refusal
    /// points at it (see [`checked`]).
    pub(crate) trait Validate {
        /// `Err` with a message naming the setting at fault.
        fn check(&self) -> Result<(), String>;
    }

    /// `deserialize_with` for a [`Validate`] value: reads it, then checks it.
    pub(crate) fn checked<'de, D: Deserializer<'de>, T: Deserialize<'de> + Validate>(
        d: D,
    ) -> Result<T, D::Error> {
        let value = T::deserialize(d)?;
        value.check().map_err(D::Error::custom)?;
        Ok(value)
    }

    /// Reads a `T` and refuses it with `why` unless `ok` holds for it.
    pub(crate) fn read_if<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
        ok: impl FnOnce(&T) -> bool,
        why: impl FnOnce(&T) -> String,
    ) -> Result<T, D::Error> {
        let v = T::deserialize(d)?;
        if ok(&v) {
            Ok(v)
        } else {
            Err(D::Error::custom(why(&v)))
        }
    }

    /// `deserialize_with` for a count in `MIN..=MAX`.
    pub(crate) fn count<'de, D: Deserializer<'de>, const MIN: u32, const MAX: u32>(
        d: D,
    ) -> Result<u32, D::Error> {
        read_if(
            d,
            |v| (MIN..=MAX).contains(v),
            |v| format!("must be in {MIN}..={MAX}, got {v}"),
        )
    }

    /// `deserialize_with` for a finite `f64` in `(0, MAX]`.
    pub(crate) fn positive<'de, D: Deserializer<'de>, const MAX: u32>(
        d: D,
    ) -> Result<f64, D::Error> {
        read_if(
            d,
            |&v: &f64| v.is_finite() && v > 0.0 && v <= f64::from(MAX),
            |v| format!("must be finite, positive and at most {MAX}, got {v:?}"),
        )
    }

    /// `deserialize_with` for a vector whose components are finite and at most `MAX` in
    /// magnitude.
    pub(crate) fn vector<'de, D: Deserializer<'de>, const MAX: u32>(
        d: D,
    ) -> Result<DVec3, D::Error> {
        read_if(
            d,
            |v: &DVec3| v.is_finite() && v.abs().max_element() <= f64::from(MAX),
            |&v| {
                format!(
                    "must be finite and at most {MAX} in each component, got {}",
                    tuple(v)
                )
            },
        )
    }

    /// `v` as a RON tuple, each number as Rust writes it shortest (`1e300`, not 301 digits).
    pub(crate) fn tuple(v: impl Into<DVec3>) -> String {
        let v = v.into();
        format!("({:?}, {:?}, {:?})", v.x, v.y, v.z)
    }

    /// The types whose own `validate` is their check.
    macro_rules! validate_by_own_rules {
        ($($t:ty),*) => {$(
            impl Validate for $t {
                fn check(&self) -> Result<(), String> {
                    self.validate().map_err(|e| e.to_string())
                }
            }
        )*};
    }

    validate_by_own_rules!(
        crate::ContactSettings,
        crate::Aerodynamics,
        crate::Material,
        crate::AttachmentSettings,
        crate::ColliderShape,
        crate::LimitSettings,
        crate::SelfCollisionSettings,
        crate::LayerSettings,
        crate::StrainCap,
        crate::SolverWeights
    );
}
