//! Comma-separated list flags (`--batch-sizes 1,8,64`, `--tp tp1,dep4`), shared by the
//! `steps` and `sweep` commands. Every error names the flag and the offending value, because
//! a sweep that silently drops or repeats a cell wastes GPU time and skews comparisons.

use crate::axes::Family;
use crate::axes::{Arm, Layout};
use anyhow::{bail, Result};
use std::fmt::Display;

/// Splits `s` on commas (spaces around items are ignored), parses each item with
/// `parse_item`, and rejects an empty list, empty items and duplicates. `example` is a
/// valid list shown in the error, e.g. `1,8,64`.
pub fn parse_list<T: PartialEq + Display>(
    s: &str,
    flag: &str,
    example: &str,
    parse_item: impl Fn(&str) -> Result<T>,
) -> Result<Vec<T>> {
    if s.trim().is_empty() {
        bail!("{flag}: the list is empty: give comma-separated values such as {example}");
    }
    let mut values: Vec<T> = Vec::new();
    for item in s.split(',').map(str::trim) {
        if item.is_empty() {
            bail!("{flag}: empty item in `{s}`: separate values with single commas, such as {example}");
        }
        let value = parse_item(item).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
        if values.contains(&value) {
            bail!("{flag}: {value} appears more than once in `{s}`: list each value once");
        }
        values.push(value);
    }
    Ok(values)
}

/// A list of positive integers, e.g. `--batch-sizes 1,8,64`; `flag` names the flag in errors.
pub fn parse_u32_list(s: &str, flag: &str) -> Result<Vec<u32>> {
    const EXAMPLE: &str = "1,8,64";
    parse_list(s, flag, EXAMPLE, |item| {
        let digits = item.strip_prefix(['-', '+']).unwrap_or(item);
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            bail!("`{item}` is not a whole number: use positive integers such as {EXAMPLE}");
        }
        match item.parse::<i64>() {
            Ok(v) if v <= 0 => {
                bail!("{v} is not a valid value: use positive integers such as {EXAMPLE}")
            }
            Ok(v) => u32::try_from(v).map_err(|_| {
                anyhow::anyhow!(
                    "{v} is too large: the largest accepted value is {}",
                    u32::MAX
                )
            }),
            // Only digits got here, so the one way to fail is overflow.
            Err(_) => bail!(
                "{item} is out of range: use positive integers up to {}",
                u32::MAX
            ),
        }
    })
}

/// `--families`: metadata families such as `dsa_decode,dsa_target_verify`.
pub fn families(list: &str) -> Result<Vec<Family>> {
    parse_list(list, "--families", "dsa_decode,dsa_target_verify", |s| {
        s.parse().map_err(anyhow::Error::msg)
    })
}

/// `--arms`: arms such as `eager-sync,graph`.
pub fn arms(list: &str) -> Result<Vec<Arm>> {
    parse_list(list, "--arms", "eager-sync,graph", |s| {
        s.parse().map_err(anyhow::Error::msg)
    })
}

/// `--tp`: layouts such as `tp1,tp8,dep4`.
pub fn layouts(list: &str) -> Result<Vec<Layout>> {
    parse_list(list, "--tp", "tp1,tp8,dep4", str::parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        format!("{:#}", parse_u32_list(s, "--batch-sizes").unwrap_err())
    }

    #[test]
    fn parses_values_in_order_and_ignores_spaces() {
        assert_eq!(
            parse_u32_list("64, 1 ,8", "--batch-sizes").unwrap(),
            vec![64, 1, 8]
        );
        assert_eq!(parse_u32_list("4294967295", "--x").unwrap(), vec![u32::MAX]);
    }

    #[test]
    fn rejects_empty_list() {
        for s in ["", "  "] {
            let e = err(s);
            assert!(e.contains("--batch-sizes") && e.contains("empty"), "{e}");
        }
    }

    #[test]
    fn rejects_empty_items() {
        for s in ["1,,8", "1,8,", ",1"] {
            let e = err(s);
            assert!(e.contains("--batch-sizes: empty item"), "{e}");
        }
    }

    #[test]
    fn rejects_zero() {
        let e = err("1,0");
        assert!(
            e.starts_with("--batch-sizes: 0 is not a valid value"),
            "{e}"
        );
    }

    #[test]
    fn rejects_negative() {
        let e = err("-3");
        assert!(
            e.starts_with("--batch-sizes: -3 is not a valid value"),
            "{e}"
        );
    }

    #[test]
    fn rejects_non_numeric() {
        for bad in ["abc", "1.5", "8x", "0x10", "-"] {
            let e = err(&format!("1,{bad}"));
            assert!(
                e.contains("--batch-sizes")
                    && e.contains(&format!("`{bad}` is not a whole number")),
                "{e}"
            );
        }
    }

    #[test]
    fn rejects_too_large() {
        for bad in ["4294967296", "99999999999999999999999"] {
            let e = err(bad);
            assert!(e.contains("too large") || e.contains("out of range"), "{e}");
        }
    }

    #[test]
    fn rejects_duplicates() {
        let e = err("1,8,8");
        assert!(e.contains("--batch-sizes: 8 appears more than once"), "{e}");
        // "+8" and "8" are the same value.
        assert!(err("8,+8").contains("appears more than once"));
    }

    #[test]
    fn layouts_accept_and_reject() {
        assert_eq!(
            layouts("tp1, dep4,tp8").unwrap(),
            vec![Layout::Tp(1), Layout::Dep(4), Layout::Tp(8)]
        );
        let dup = format!("{:#}", layouts("tp1,tp1").unwrap_err());
        assert!(
            dup.contains("--tp") && dup.contains("tp1 appears more than once"),
            "{dup}"
        );
        let empty = format!("{:#}", layouts("tp1,,tp2").unwrap_err());
        assert!(empty.contains("--tp: empty item"), "{empty}");
        let unknown = format!("{:#}", layouts("tp2,tp3").unwrap_err());
        assert!(
            unknown.contains("--tp") && unknown.contains("`tp3` is not a layout"),
            "{unknown}"
        );
        assert!(layouts("").is_err());
    }
}
