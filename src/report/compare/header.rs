//! The report's header: both sides, the arms, the verdict line, warnings and how to read it.

use super::comparison::Comparison;
use super::markdown::{verdict_line, Context, REPORT_HEADER};
use super::side::Side;
use crate::results::env::code;
use std::fmt::Write;

pub(super) fn write_header(out: &mut String, c: &Comparison, context: &Context) {
    writeln!(out, "{REPORT_HEADER}\n").unwrap();
    for side in [&c.base, &c.new] {
        write_side(out, side);
    }
    if let Some((base_arm, new_arm)) = &c.arms {
        writeln!(
            out,
            "**Arms:** {} (BASE) → {} (NEW)  ",
            code(base_arm),
            code(new_arm)
        )
        .unwrap();
    }
    writeln!(out).unwrap();
    writeln!(out, "{}\n", verdict_line(c, context.exit_code)).unwrap();
    for warning in context.warnings {
        writeln!(out, "> {warning}\n").unwrap();
    }
    writeln!(
        out,
        "Change = NEW / BASE − 1 with a 95% interval; `same` inside ±{t}%, `faster` / `slower` \
         wholly beyond it, `uncertain` otherwise. \"could call\" is the smallest slower change \
         the row's intervals could have called. How to read it: docs/compare.md.\n",
        t = c.threshold_pct
    )
    .unwrap();
}

fn write_side(out: &mut String, side: &Side) {
    write!(
        out,
        "**{}** {}",
        side.which.as_str(),
        code(&side.path.display().to_string())
    )
    .unwrap();
    if let Some(env) = &side.env {
        write!(
            out,
            " — git {}, {}, {} ×{}, driver {}",
            code(&env.git_revision),
            env.date,
            env.gpu_name,
            env.gpu_count,
            env.driver_version
        )
        .unwrap();
    }
    writeln!(out, "  ").unwrap();
}
