//! Comma-separated list flags (`--batch-sizes 1,8,64`, `--tp tp1,dep4`): clap splits them
//! (`value_delimiter = ','`) and parses each item with a parser here; [`distinct`] then refuses
//! a repeated value. Every error names the flag and the offending value, because a sweep that
//! silently drops or repeats a cell wastes GPU time and skews comparisons.

use crate::axes::Family;
use crate::axes::{Arm, Layout};
use anyhow::{bail, Result};
use std::fmt::Display;

/// A valid list, shown in the errors of the integer lists.
const EXAMPLE: &str = "1,8,64";

/// An item that is empty (`1,,8`, `1,8,`, or an empty list).
fn empty_item(example: &str) -> String {
    format!("an empty item: give comma-separated values such as {example}, with single commas")
}

/// One item of a list of positive integers (`--batch-sizes 1,8,64`); spaces around it are
/// ignored.
pub fn positive_u32(item: &str) -> Result<u32, String> {
    let item = item.trim();
    if item.is_empty() {
        return Err(empty_item(EXAMPLE));
    }
    let digits = item.strip_prefix(['-', '+']).unwrap_or(item);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "`{item}` is not a whole number: use positive integers such as {EXAMPLE}"
        ));
    }
    match item.parse::<i64>() {
        Ok(v) if v <= 0 => Err(format!(
            "{v} is not a valid value: use positive integers such as {EXAMPLE}"
        )),
        Ok(v) => u32::try_from(v).map_err(|_| {
            format!(
                "{v} is too large: the largest accepted value is {}",
                u32::MAX
            )
        }),
        // Only digits got here, so the one way to fail is overflow.
        Err(_) => Err(format!(
            "{item} is out of range: use positive integers up to {}",
            u32::MAX
        )),
    }
}

/// One item of `--families`, such as `dsa_decode`.
pub fn family(item: &str) -> Result<Family, String> {
    named(item, "dsa_decode,dsa_target_verify")
}

/// One item of `--arms`, such as `graph`.
pub fn arm(item: &str) -> Result<Arm, String> {
    named(item, "eager-sync,graph")
}

/// One item of `--tp`, such as `dep4`.
pub fn layout(item: &str) -> Result<Layout, String> {
    let item = item.trim();
    if item.is_empty() {
        return Err(empty_item("tp1,tp8,dep4"));
    }
    item.parse().map_err(|e: anyhow::Error| e.to_string())
}

fn named<T: std::str::FromStr<Err = String>>(item: &str, example: &str) -> Result<T, String> {
    let item = item.trim();
    if item.is_empty() {
        return Err(empty_item(example));
    }
    item.parse()
}

/// `values` of the list flag `flag`, refused where one appears twice (`+8` and `8` are one).
pub fn distinct<T: PartialEq + Display>(values: &[T], flag: &str) -> Result<()> {
    if let Some((_, value)) = values
        .iter()
        .enumerate()
        .find(|(i, v)| values[..*i].contains(v))
    {
        let list: Vec<String> = values.iter().map(ToString::to_string).collect();
        bail!(
            "{flag}: {value} appears more than once in `{}`: list each value once",
            list.join(",")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_positive_whole_numbers_and_spaces_are_ignored() {
        assert_eq!(positive_u32(" 64 "), Ok(64));
        assert_eq!(positive_u32("+8"), Ok(8));
        assert_eq!(positive_u32("4294967295"), Ok(u32::MAX));
        for (bad, says) in [
            ("", "an empty item"),
            ("  ", "an empty item"),
            ("0", "0 is not a valid value"),
            ("-3", "-3 is not a valid value"),
            ("4294967296", "too large"),
            ("99999999999999999999999", "out of range"),
        ] {
            let e = positive_u32(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        for bad in ["abc", "1.5", "8x", "0x10", "-"] {
            let e = positive_u32(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}` is not a whole number")), "{e}");
        }
    }

    #[test]
    fn a_repeated_value_is_refused_naming_the_flag() {
        distinct(&[1, 8, 64], "--batch-sizes").unwrap();
        let e = format!("{:#}", distinct(&[1, 8, 8], "--batch-sizes").unwrap_err());
        assert!(
            e.starts_with("--batch-sizes: 8 appears more than once in `1,8,8`"),
            "{e}"
        );
        // "+8" and "8" parse to one value.
        let twice = [positive_u32("8").unwrap(), positive_u32("+8").unwrap()];
        assert!(distinct(&twice, "--batch-sizes").is_err());
    }

    #[test]
    fn layouts_families_and_arms_accept_and_reject() {
        assert_eq!(layout(" dep4"), Ok(Layout::Dep(4)));
        assert!(layout("tp3").unwrap_err().contains("`tp3` is not a layout"));
        assert!(layout("").unwrap_err().contains("an empty item"));
        let dup = format!(
            "{:#}",
            distinct(&[Layout::Tp(1), Layout::Tp(1)], "--tp").unwrap_err()
        );
        assert!(dup.contains("--tp: tp1 appears more than once"), "{dup}");
        assert_eq!(arm("graph"), Ok(Arm::Graph));
        assert!(arm("Graph").is_err() && arm("").is_err());
        assert_eq!(family(" dsa_decode "), Ok(Family::DsaDecode));
        assert!(family("dsa").is_err());
    }
}
