//! Help that fits a screen: `-h` and `--help` print one line a flag (the first sentence of
//! its explanation), `--help-all` every word, and docs/commands.md the long form.

use clap::{Arg, ArgAction, Command};

/// Where the long explanations live, named at the foot of every command's short help.
pub const COMMANDS_DOC: &str = "docs/commands.md";

/// Flags most runs leave alone: `--help-all` shows them, `-h` counts them.
const ADVANCED: &[&str] = &[
    "kernel_image",
    "sync",
    "cpu",
    "nvtx",
    "custom_weight_bytes_per_layer",
    "custom_layers",
    "custom_kv_bytes_per_token_per_layer",
    "custom_hidden_size",
    "host_work_us",
    "link_gb_s",
    "collective_latency_us",
    "round_steps",
    "warmup_steps",
    "timeline_steps",
    "timeline_cap_ms",
    "timer",
    "cupti_lib",
    "nccl_lib",
    "read_skew_us",
    "read_skew_jitter_us",
    "read_skew_rank",
    "max_context",
    "cell_time_cap_ms",
    "start_timeout_s",
    "pair_timeout_s",
    "redo_bound_pct",
];

/// Characters before a colon for it to end the short help.
const MIN_LEAD_IN: usize = 20;

/// Short help longer than this drops its parentheses.
const SHORT_HELP_CHARS: usize = 90;

/// `cmd` with short help on `-h`/`--help`, the whole help on `--help-all`, and each flag's
/// short help cut to its first sentence.
pub fn fit_to_screen(cmd: Command) -> Command {
    let name = cmd.get_name().to_string();
    let about = cmd.get_about().map(|a| first_sentence(&a.to_string()));
    let long_about = cmd.get_long_about().or(cmd.get_about()).cloned();
    let cmd = match (about, long_about) {
        (Some(about), Some(long)) => cmd.about(about).long_about(long),
        _ => cmd,
    };
    let cmd = cmd.mut_args(|a| {
        let Some(full) = a.get_long_help().or(a.get_help()).map(|h| h.to_string()) else {
            return a;
        };
        let short = first_sentence(&full);
        let hide = a.is_hide_short_help_set() || ADVANCED.contains(&a.get_id().as_str());
        let a = a.help(short).long_help(full).hide_short_help(hide);
        match a.get_value_names() {
            Some(names) if a.get_action().takes_values() => {
                let short: Vec<String> = names.iter().map(|n| short_value_name(n)).collect();
                a.value_names(short)
            }
            _ => a,
        }
    });
    // What `-h` leaves out, as the flags now say.
    let more = match (cmd.get_arguments())
        .filter(|a| a.is_hide_short_help_set() && !a.is_hide_set())
        .count()
    {
        0 => String::new(),
        n => format!(" ({n} more flags)"),
    };
    cmd.term_width(160)
        .disable_help_flag(true)
        .arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::HelpShort)
                .help("Print this help (--help-all: every flag, in full)"),
        )
        .arg(
            Arg::new("help_all")
                .long("help-all")
                .action(ArgAction::HelpLong)
                .help("Print every flag with its whole explanation")
                .hide_short_help(true),
        )
        .after_help(format!(
            "--help-all prints every flag{more} in full; {COMMANDS_DOC} explains `{name}`."
        ))
}

/// The text up to the end of its first sentence: a period, then a space or the end, outside
/// brackets and code spans.
pub fn first_sentence(text: &str) -> String {
    let text = text
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .replace('\n', " ");
    let (mut depth, mut code) = (0i32, false);
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '`' => code = !code,
            // A colon ends a sentence that names its subject; a shorter lead-in is
            // followed by what it introduces.
            '.' | ':' if depth == 0 && !code && (c == '.' || i >= MIN_LEAD_IN) => {
                let next = chars.get(i + 1);
                if next.is_none_or(|n| n.is_whitespace()) {
                    let sentence = chars[..i].iter().collect::<String>();
                    return without_asides(sentence.trim().to_string());
                }
            }
            _ => {}
        }
    }
    without_asides(text.trim().trim_end_matches('.').to_string())
}

/// `text` without its parenthesised asides where it is longer than a line holds.
fn without_asides(text: String) -> String {
    if text.chars().count() <= SHORT_HELP_CHARS {
        return text;
    }
    let (mut out, mut depth) = (String::new(), 0);
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let out = out.replace("  ", " ").replace(" ,", ",").replace(" ;", ";");
    out.trim().to_string()
}

/// A value name a screen holds: clap's default is the flag's whole name in capitals, which
/// pushes every flag's help onto a line of its own; its last word says enough beside the flag.
fn short_value_name(name: &str) -> String {
    match name.len() {
        0..=8 => name.to_string(),
        _ => name.rsplit(['_', '-']).next().unwrap_or(name).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_help_is_the_first_sentence_less_its_asides_when_long() {
        assert_eq!(
            first_sentence("Fewest rounds per cell. A cell's row is…"),
            "Fewest rounds per cell"
        );
        // A colon after a short lead-in introduces the rest; after a long one it ends it.
        assert_eq!(
            first_sentence("The step program: `dspark` (the block) or `eagle`. More."),
            "The step program: `dspark` (the block) or `eagle`"
        );
        assert_eq!(
            first_sentence("Arms, comma separated: eager-sync (reads)"),
            "Arms, comma separated"
        );
        // Periods inside code, brackets or numbers do not end it.
        assert_eq!(
            first_sentence("Write `summary.md` (see docs/a.md. b) at 0.5 ms. Then"),
            "Write `summary.md` (see docs/a.md. b) at 0.5 ms"
        );
        let long = "Time cap of a cell over all its rounds (past --min-rounds, precise or not, \
                    the group stopping once spent), ms";
        assert_eq!(
            first_sentence(long),
            "Time cap of a cell over all its rounds, ms"
        );
    }

    #[test]
    fn long_value_names_keep_their_last_word() {
        assert_eq!(short_value_name("CELL_TIME_CAP_MS"), "MS");
        assert_eq!(short_value_name("SEED"), "SEED");
        assert_eq!(short_value_name("BATCH_SIZES"), "SIZES");
    }
}
