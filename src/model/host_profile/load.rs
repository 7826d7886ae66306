//! Loading a profile: the built-in ones, a file, its JSON, and which field a refused JSON
//! got wrong.

use super::HostProfile;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// Profiles shipped with the binary, by name.
pub const BUILT_IN: [(&str, &str); 3] = [
    ("native", include_str!("../../../host-profiles/native.json")),
    (
        "pytorch",
        include_str!("../../../host-profiles/pytorch.json"),
    ),
    (
        "pytorch-transcription",
        include_str!("../../../host-profiles/pytorch-transcription.json"),
    ),
];

/// The top-level field of a profile's JSON that serde refused (its own error names a line and
/// column, not the field): the first whose value, put into the built-in `pytorch` profile,
/// breaks it there too.
fn field_of_error(text: &str) -> Option<String> {
    let serde_json::Value::Object(given) = serde_json::from_str(text).ok()? else {
        return None;
    };
    let (_, base) = BUILT_IN.iter().find(|(n, _)| *n == "pytorch")?;
    let base: serde_json::Value = serde_json::from_str(base).ok()?;
    given.into_iter().find_map(|(key, value)| {
        let mut probe = base.clone();
        probe.as_object_mut()?.insert(key.clone(), value);
        serde_json::from_value::<HostProfile>(probe)
            .is_err()
            .then_some(key)
    })
}

impl HostProfile {
    /// `native`, `pytorch`, or a path to a JSON profile.
    pub fn load(name_or_path: &str) -> Result<HostProfile> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::parse(text).with_context(|| format!("built-in profile {name_or_path}"));
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            bail!(
                "--host-profile: `{name_or_path}` is neither a built-in profile ({}) nor a file",
                BUILT_IN.map(|(n, _)| n).join(", ")
            );
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the host profile {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("host profile {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<HostProfile> {
        let profile: HostProfile = serde_json::from_str(text).map_err(|e| {
            let why = match field_of_error(text) {
                Some(field) => format!("not a host profile: field `{field}`"),
                None => "not a host profile".to_string(),
            };
            anyhow::Error::new(e).context(why)
        })?;
        profile.check_well_formed()?;
        Ok(profile)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a profile serialises") + "\n"
    }
}
