//! The old-run path: a record without `settings` (a metaprep before them) says what its run
//! measured only in its command line and its setting notes, and is read back from those.

use super::*;

/// The host profile's name from a steps run's `host profile `NAME` (...)` note.
pub(super) fn host_profile(env: &EnvRecord) -> Option<&str> {
    env.notes
        .iter()
        .find_map(|n| n.strip_prefix(HOST_PROFILE_NOTE))
        .and_then(|n| n.split('`').next())
}

/// Whether an `emulated: LAYOUT ...` note is among the notes.
pub(super) fn notes_emulation_of(env: &EnvRecord, layout: &str) -> bool {
    let prefix = format!("{EMULATED_NOTE}{layout} ");
    env.notes.iter().any(|n| n.starts_with(&prefix))
}

/// What a run was asked to measure, keyed by (rank, name) in report order: its subcommand
/// (`command`), every flag of its command line but those in [`NOT_SETTINGS`] (the
/// program's path aside), and the notes that record resolved settings (`host profile`,
/// `step model`).
fn settings(env: &EnvRecord) -> BTreeMap<(u8, String), String> {
    let mut settings = BTreeMap::new();
    let mut command = Vec::new();
    let mut args = env.command_line.split_whitespace().skip(1).peekable();
    while let Some(arg) = args.next() {
        if !arg.starts_with("--") {
            command.push(arg);
            continue;
        }
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, value),
            None => (arg, args.next_if(|a| !a.starts_with("--")).unwrap_or("")),
        };
        if NOT_SETTINGS.contains(&flag) {
            continue;
        }
        let flag = RENAMED_FLAGS
            .iter()
            .find(|(old, _)| *old == flag)
            .map_or(flag, |(_, new)| new);
        // A repeated flag (`--host-scale 1 --host-scale 2`) adds to its list.
        settings
            .entry((1, flag.to_string()))
            .and_modify(|v: &mut String| {
                v.push(',');
                v.push_str(value);
            })
            .or_insert_with(|| value.to_string());
    }
    if !command.is_empty() {
        settings.insert((0, "command".to_string()), command.join(" "));
    }
    for (name, prefix) in [
        ("host profile", HOST_PROFILE_NOTE),
        ("step model", STEP_MODEL_NOTE),
        ("memory per GPU", MEMORY_NOTE),
    ] {
        let notes: Vec<&str> = env
            .notes
            .iter()
            .filter(|n| n.starts_with(prefix))
            // Each note begins with its name; a profile's name keeps its backticks.
            .map(|n| n[name.len()..].trim_start_matches(':').trim())
            .collect();
        if !notes.is_empty() {
            settings.insert((2, name.to_string()), notes.join("; "));
        }
    }
    settings
}

/// Every setting (see `settings`) two runs recorded differently, `env`'s value first: the
/// command, then flags by name, then the setting notes. A comma list is compared as a set,
/// since the order of an axis is the order cells ran in, not what they measure.
pub(super) fn setting_differences(env: &EnvRecord, other: &EnvRecord) -> Vec<Difference> {
    let (mine, theirs) = (settings(env), settings(other));
    fn as_set(value: &str) -> BTreeSet<&str> {
        value.split(',').map(str::trim).collect()
    }
    let names: BTreeSet<&(u8, String)> = mine.keys().chain(theirs.keys()).collect();
    names
        .into_iter()
        .filter(|key| {
            mine.get(*key).map(String::as_str).map(as_set)
                != theirs.get(*key).map(String::as_str).map(as_set)
        })
        .map(|key| Difference {
            name: key.1.clone(),
            this: mine.get(key).cloned(),
            other: theirs.get(key).cloned(),
        })
        .collect()
}
