//! The summary's run description: the environment line, the command line as a reader can run
//! it (no GPU host's absolute paths), and the callouts said once (emulated layouts, throttled
//! cells, GPM figures, the run's own notes).

use crate::report::format::layout_rank;
use crate::results::csv::{CellKey, Row};
use crate::results::env::{code, EnvRecord};
use std::collections::BTreeSet;
use std::fmt::{self, Write};
use std::path::Path;

/// How the environment line every summary holds begins: what tells a summary `report` wrote
/// from a user's file of the same name.
pub const ENVIRONMENT_LINE: &str = "**Environment:** ";

pub(super) fn write_environment(out: &mut String, env: &EnvRecord) -> fmt::Result {
    let or_na = |s: &str| {
        if s.is_empty() {
            "n/a".to_string()
        } else {
            s.to_string()
        }
    };
    writeln!(
        out,
        "{ENVIRONMENT_LINE}{}× {} (compute capability {}, {} SMs) · driver {} · CUDA {} · {} · \
         git {} · metaprep {}  ",
        env.gpu_count,
        or_na(&env.gpu_name),
        or_na(&env.compute_capability),
        env.sm_count,
        or_na(&env.driver_version),
        or_na(&env.cuda_driver_version),
        or_na(&env.date),
        code(&or_na(&env.git_revision)),
        or_na(&env.metaprep_version),
    )?;
    writeln!(
        out,
        "**Command:** {}\n",
        code(&or_na(&portable_command(&env.command_line)))
    )
}

/// The command line as a reader can run it: the program as `metaprep` (not the GPU host's
/// `./metaprep` or `/root/bundle/metaprep`), and every absolute path relative to the folder
/// holding the run (`--out`'s parent): `/root/out/h/steps-default/trace.json` becomes
/// `steps-default/trace.json`. An absolute path outside that folder keeps only its file name.
pub fn portable_command(command_line: &str) -> String {
    let mut words = command_line.split_whitespace();
    let Some(_program) = words.next() else {
        return String::new();
    };
    let words: Vec<&str> = words.collect();
    let out_parent = out_value(&words)
        .filter(|out| out.starts_with('/'))
        .and_then(|out| Path::new(out).parent().map(Path::to_path_buf));
    let portable = |path: &str| -> String {
        if !path.starts_with('/') {
            return path.to_string();
        }
        let path = Path::new(path);
        match out_parent
            .as_deref()
            .and_then(|p| path.strip_prefix(p).ok())
        {
            Some(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
            _ => path.file_name().map_or(path.display().to_string(), |n| {
                n.to_string_lossy().into_owned()
            }),
        }
    };
    let mut shown = vec!["metaprep".to_string()];
    for word in words {
        shown.push(match word.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => format!("{flag}={}", portable(value)),
            _ => portable(word),
        });
    }
    shown.join(" ")
}

/// The value of `--out` (`--out DIR` or `--out=DIR`) among `words`.
fn out_value<'a>(words: &[&'a str]) -> Option<&'a str> {
    words
        .iter()
        .enumerate()
        .find_map(|(i, w)| match w.strip_prefix("--out") {
            Some("") => words.get(i + 1).copied(),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        })
}

pub(super) fn write_callouts(out: &mut String, rows: &[Row], env: &EnvRecord) -> fmt::Result {
    for callout in &env.callouts {
        writeln!(out, "> ⚠ {callout}\n")?;
    }
    let emulated: BTreeSet<(u8, &str)> = rows
        .iter()
        .filter(|r| r.emulated)
        .map(|r| (layout_rank(&r.layout), r.layout.as_str()))
        .collect();
    // Said once: by the run's own note where it wrote one (it says how), else here.
    for (_, layout) in emulated {
        if !env.notes_emulation_of(layout) {
            writeln!(out, "> {}\n", emulated_note(layout, env))?;
        }
    }
    let throttled: BTreeSet<(CellKey, &str)> = rows
        .iter()
        .filter(|r| r.throttled)
        .map(|r| (r.cell_key(), r.clock_event_reasons.as_str()))
        .collect();
    if !throttled.is_empty() {
        writeln!(
            out,
            "> ⚠ throttled: {} cell(s) ran while NVML reported clock events other than idle; \
             their numbers may be pessimistic (marked ⚠ below):",
            throttled.len()
        )?;
        for (cell, reasons) in &throttled {
            writeln!(out, "> - {cell} (clock events {})", or_unknown(reasons))?;
        }
        writeln!(out)?;
    }
    crate::report::gpm::write_gpm(out, rows)?;
    Ok(())
}

/// The run's own notes (how it ran: pinning, workers, the step model, memory), at the end and
/// folded, one line until opened: they say how the answer was measured, not what it is.
pub(super) fn write_notes(out: &mut String, env: &EnvRecord, whole: bool) -> fmt::Result {
    if env.notes.is_empty() {
        return Ok(());
    }
    if !whole {
        return writeln!(
            out,
            "_{} notes on how the run measured: `tables.md` and env.json._",
            env.notes.len()
        );
    }
    writeln!(
        out,
        "<details><summary>{} notes on how the run measured (env.json holds them too)</summary>\n",
        env.notes.len()
    )?;
    for note in &env.notes {
        // A note's wrapped source lines can leave runs of spaces inside it.
        let note = note.split_whitespace().collect::<Vec<_>>().join(" ");
        writeln!(out, "> note: {note}\n")?;
    }
    writeln!(out, "</details>")
}

fn emulated_note(layout: &str, env: &EnvRecord) -> String {
    let gpus = match env.gpu_count {
        0 | 1 => "1 GPU".to_string(),
        n => format!("1 GPU (the machine has {n})"),
    };
    format!("⚠ emulated: {layout} ran one rank on {gpus}")
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "unknown"
    } else {
        s
    }
}

#[cfg(test)]
mod tests {

    use crate::results::csv::Row;

    use super::*;
    use crate::report::summary::fixtures::{prep, step};
    use crate::report::summary::render_summary;

    use crate::results::env::test_env;

    #[test]
    fn throttled_and_emulated_cells_are_called_out() {
        let mut hot = prep("graph", 22.5);
        hot.throttled = true;
        hot.clock_event_reasons = "0x0000000000000020".into();
        let mut wide = step("graph", "itl_us", 160.0);
        wide.layout = "tp8".into();
        wide.emulated = true;
        let mut env = test_env();
        env.gpu_count = 2;
        let text = render_summary(&[hot, wide], &env);
        assert!(text.contains("⚠ throttled: 1 cell(s)"), "{text}");
        assert!(
            text.contains("graph bs=4 block=5 tp1 (clock events 0x0000000000000020)"),
            "{text}"
        );
        assert!(text.contains("| 22.5 ⚠ |"), "{text}");
        assert!(text.contains("### Decode step — tp8 (emulated), dspark+dsa_target_verify"));
        assert_eq!(
            text.matches("⚠ emulated: tp8 ran one rank on 1 GPU (the machine has 2)")
                .count(),
            1,
            "said once: {text}"
        );
        // A run that noted how it emulated the layout is not told again.
        env.notes =
            vec!["emulated: tp8 needs 8 GPUs, ran as 1 rank(s) on a host with 2; ...".into()];
        let text = render_summary(&[wide_row()], &env);
        assert_eq!(text.matches("emulated: tp8").count(), 1, "{text}");
    }

    #[test]
    fn callouts_lead_and_the_compact_summary_folds_its_notes_into_one_line() {
        let mut env = test_env();
        env.callouts = vec!["planned on an H200's 141 GiB a GPU: the default ...".into()];
        env.notes = vec!["worker 1: pinned".into(), "worker 2: pinned".into()];
        let rows = [step("graph", "itl_us", 160.0)];
        let whole = render_summary(&rows, &env);
        let compact = crate::report::summary::render_compact(&rows, &env);
        for text in [&whole, &compact] {
            let callout = text
                .find("> ⚠ planned on an H200's 141 GiB")
                .expect("the callout");
            assert!(callout < text.find("###").unwrap(), "{text}");
        }
        assert!(whole.contains("> note: worker 2: pinned"), "{whole}");
        assert!(!compact.contains("worker 2"), "{compact}");
        assert!(
            compact.contains("_2 notes on how the run measured"),
            "{compact}"
        );
    }

    fn wide_row() -> Row {
        Row {
            layout: "tp8".into(),
            emulated: true,
            ..step("graph", "itl_us", 160.0)
        }
    }

    #[test]
    fn the_command_line_loses_the_gpu_hosts_absolute_paths() {
        assert_eq!(
            portable_command(
                "./metaprep steps --out /root/out/h/steps-default --trace /root/out/h/steps-default/trace.json \
                 --host-profile=/root/bundle/host-profiles/pytorch.json --tp tp8"
            ),
            "metaprep steps --out steps-default --trace steps-default/trace.json \
             --host-profile=pytorch.json --tp tp8"
        );
        assert_eq!(
            portable_command("/a/metaprep sweep --out results/x --batch-sizes 1"),
            "metaprep sweep --out results/x --batch-sizes 1"
        );
        assert_eq!(portable_command(""), "");
    }

    #[test]
    fn gpm_figures_sit_beside_the_throttling_callout() {
        let mut busy = prep("eager-sync", 40.0);
        busy.throttled = true;
        busy.gpm_sm_util_pct = Some(88.0);
        busy.gpm_dram_bw_util_pct = Some(45.0);
        busy.gpm_cell_share_pct = Some(100.0);
        let mut env = test_env();
        env.notes = vec!["a note".into()];
        let text = render_summary(&[busy], &env);
        let throttled = text
            .find("⚠ throttled: 1 cell(s)")
            .expect("throttle callout");
        let gpm = text
            .find("> GPM (NVML, per cell, over 1 cells): SM activity 88.0–88.0%")
            .unwrap_or_else(|| panic!("{text}"));
        let note = text.find("> note: a note").expect("note");
        assert!(throttled < gpm && gpm < note, "{text}");
        // The notes come last, folded.
        let folded = text
            .find("<details><summary>1 notes on how the run measured")
            .unwrap();
        assert!(
            folded < note && text.trim_end().ends_with("</details>"),
            "{text}"
        );
        // Without GPM figures the summary has no GPM line, and a GPM note shows as any note.
        env.notes = vec!["GPM metrics unavailable: MIG".into()];
        let text = render_summary(&[prep("graph", 20.0)], &env);
        assert!(!text.contains("> GPM"), "{text}");
        assert!(
            text.contains("> note: GPM metrics unavailable: MIG"),
            "{text}"
        );
    }
}
