//! The CSV reading every table of a run shares (results, ranks, telemetry, rounds): a file
//! read whole or record by record, a cut last line, a short line, a header with missing,
//! unexpected or repeated columns, and a field that does not parse, each named by line and
//! column with what to do next.

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads a CSV whose header must hold exactly `columns` (in any order), less any of
/// `optional` (which `T` must default), into `T`s, each with the line it was on (for the
/// caller's own checks to name).
pub(crate) fn read_table<T: DeserializeOwned>(
    path: &Path,
    columns: &[&str],
    optional: &[&str],
) -> Result<Vec<(u64, T)>> {
    let name = path.display().to_string();
    let table = read_records(path)?;
    check_header(&name, &table.headers, columns, optional)?;
    table
        .records
        .iter()
        .map(|(line, record)| {
            let value = record
                .deserialize(Some(&table.headers))
                .map_err(|e| describe_field_error(&name, *line, &table.headers, record, &e))?;
            Ok((*line, value))
        })
        .collect()
}

/// A CSV file read whole: its header and each record with its line number.
pub(crate) struct Records {
    pub headers: csv::StringRecord,
    pub records: Vec<(u64, csv::StringRecord)>,
}

/// Reads every record of a CSV, each as long as the header. A file must end in a newline:
/// every writer here ends each record with one, so a file without it was cut while being
/// written (a last number `72.0` cut to `7` would otherwise read as a smaller number).
pub(crate) fn read_records(path: &Path) -> Result<Records> {
    let mut headers = csv::StringRecord::new();
    let mut records = Vec::new();
    visit_records(
        path,
        |h| {
            headers = h.clone();
            Ok(())
        },
        |_, line, record| {
            records.push((line, record));
            Ok(())
        },
    )?;
    Ok(Records { headers, records })
}

/// The lines records of one file start on, blank lines above each counted (the reader's own
/// line count skips them). Records are asked for in order, so each count goes on from the
/// last: one pass over the file, however many records.
#[derive(Default)]
pub(crate) struct RecordLines {
    /// Bytes counted so far, and the newlines among them.
    at: usize,
    newlines: u64,
}

impl RecordLines {
    /// The line `record` of `bytes` starts on. Its position is where reading it began: past
    /// the record before, at the blank lines or the `\n` of a `\r\n` between them.
    pub(crate) fn of(&mut self, bytes: &[u8], record: &csv::StringRecord) -> u64 {
        let mut start = (record.position())
            .map_or(0, |p| p.byte() as usize)
            .min(bytes.len());
        while start < bytes.len() && matches!(bytes[start], b'\r' | b'\n') {
            start += 1;
        }
        if start < self.at {
            *self = RecordLines::default(); // asked out of order: count from the top
        }
        self.newlines += bytes[self.at..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        self.at = start;
        self.newlines + 1
    }
}

/// [`read_records`]' checks, handing the header to `header` and then each record (with the
/// header and its line) to `each` as it is read, so a caller that turns records into rows holds one record
/// at a time rather than all of them beside the rows.
pub(crate) fn visit_records(
    path: &Path,
    mut header: impl FnMut(&csv::StringRecord) -> Result<()>,
    mut each: impl FnMut(&csv::StringRecord, u64, csv::StringRecord) -> Result<()>,
) -> Result<()> {
    let name = path.display();
    let bytes = match crate::results::compressed::read_file(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{name} does not exist: check the path (results are written by \
             `metaprep sweep --out DIR` and `metaprep steps --out DIR`)"
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {name}")),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        bail!(
            "{name} is empty (no header line): the run that wrote it stopped before its first \
             result; rerun it"
        );
    }
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(bytes.as_slice());
    let headers = reader
        .headers()
        .with_context(|| format!("{name} line 1: cannot read the header"))?
        .clone();
    let mut lines = RecordLines::default();
    let mut read = |record: csv::Result<csv::StringRecord>| {
        record.map(|r| (lines.of(&bytes, &r), r)).map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            anyhow::anyhow!("{name} line {line}: {e}: fix or delete that line")
        })
    };
    if bytes.last() != Some(&b'\n') {
        // Cut while being written: the last line is named, whatever else is wrong before it.
        let mut last = None;
        for record in reader.records() {
            last = Some(read(record)?);
        }
        let Some((line, record)) = last else {
            bail!(
                "{name} line 1: the file ends inside its header (no final newline): it was cut \
                 while being written; regenerate it"
            );
        };
        bail!(
            "{name} line {line}: the last line has no final newline ({} of {} fields): the \
             file was cut while being written, so its last value may be cut too; delete that \
             line and rerun the missing cell (`--resume` reruns only cells absent from the file)",
            record.len(),
            headers.len()
        );
    }
    header(&headers)?;
    for record in reader.records() {
        let (line, record) = read(record)?;
        if record.len() != headers.len() {
            bail!(
                "{name} line {line}: {} fields where the header has {}: fix or delete that line",
                record.len(),
                headers.len()
            );
        }
        each(&headers, line, record)?;
    }
    Ok(())
}

/// Names the missing and unexpected columns; the order of columns does not matter because
/// fields are matched by name.
pub(crate) fn check_header(
    name: &str,
    headers: &csv::StringRecord,
    columns: &[&str],
    optional: &[&str],
) -> Result<()> {
    let found: Vec<&str> = headers.iter().collect();
    let missing: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| !found.contains(c) && !optional.contains(c))
        .collect();
    let unexpected: Vec<&str> = found
        .iter()
        .copied()
        .filter(|c| !columns.contains(c))
        .collect();
    let duplicated: Vec<&str> = found
        .iter()
        .enumerate()
        .filter(|(i, c)| found[..*i].contains(c))
        .map(|(_, c)| *c)
        .collect();
    if missing.is_empty() && unexpected.is_empty() && duplicated.is_empty() {
        return Ok(());
    }
    let quote = |cols: &[&str]| {
        cols.iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("missing column(s) {}", quote(&missing)));
    }
    if !unexpected.is_empty() {
        problems.push(format!("unexpected column(s) {}", quote(&unexpected)));
    }
    if !duplicated.is_empty() {
        problems.push(format!("repeated column(s) {}", quote(&duplicated)));
    }
    bail!(
        "{name} line 1: the header does not match this metaprep version's schema ({}): \
         regenerate the file with this version, or pass a metaprep results file",
        problems.join("; ")
    )
}

pub(crate) fn describe_field_error(
    name: &str,
    line: u64,
    headers: &csv::StringRecord,
    record: &csv::StringRecord,
    error: &csv::Error,
) -> anyhow::Error {
    let csv::ErrorKind::Deserialize { err, .. } = error.kind() else {
        return anyhow::anyhow!("{name} line {line}: {error}: fix or delete that line");
    };
    let Some(index) = err.field().map(|i| i as usize) else {
        return anyhow::anyhow!("{name} line {line}: {err}: fix or delete that line");
    };
    let column = headers.get(index).unwrap_or("?");
    let value = record.get(index).unwrap_or("");
    let expected = match err.kind() {
        csv::DeserializeErrorKind::ParseFloat(_) => "a number",
        csv::DeserializeErrorKind::ParseInt(_) => "a whole number",
        csv::DeserializeErrorKind::ParseBool(_) => "`true` or `false`",
        _ => "the expected type",
    };
    anyhow::anyhow!(
        "{name} line {line}, column `{column}`: cannot read `{value}` as {expected} ({err}): \
         fix the value or regenerate the file"
    )
}

#[cfg(test)]
mod tests {

    use crate::results::csv::fixtures::{error_of, good_text, sample_rows, write_file};

    use crate::results::csv::*;

    #[test]
    fn missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.csv");
        let error = error_of(&path);
        assert!(error.contains("nope.csv does not exist"), "{error}");
        assert!(error.contains("metaprep sweep --out"), "{error}");
    }

    #[test]
    fn empty_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, "\n"));
        assert!(error.contains("is empty"), "{error}");
    }

    #[test]
    fn header_names_missing_and_unexpected_columns() {
        let text = good_text().replacen("median,", "middle,", 1);
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, &text));
        assert!(error.contains("line 1"), "{error}");
        assert!(error.contains("missing column(s) `median`"), "{error}");
        assert!(error.contains("unexpected column(s) `middle`"), "{error}");
    }

    #[test]
    fn foreign_csv_is_refused_with_its_columns() {
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, "a,b\n1,2\n"));
        assert!(error.contains("unexpected column(s) `a`, `b`"), "{error}");
        assert!(error.contains("`kind`"), "{error}");
    }

    #[test]
    fn truncated_last_line_is_reported() {
        let text = good_text();
        let cut = &text[..text.trim_end().rfind(',').unwrap() - 10];
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, cut));
        assert!(error.contains("line 4"), "{error}");
        assert!(
            error.contains("the last line has no final newline (23 of 30 fields)"),
            "{error}"
        );
    }

    /// A file cut inside the last field of its last line has every field, and the cut
    /// value still parses (`72.0` read as `7`): only the missing newline tells.
    #[test]
    fn a_last_line_cut_inside_its_last_value_is_refused() {
        let mut rows = sample_rows();
        rows[2].gpm_cell_share_pct = Some(72.0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(",72.0\n"), "{text}");
        let cut = &text[..text.len() - 4];
        let error = error_of(&write_file(&dir, cut));
        assert!(
            error.contains(
                "metaprep.csv line 4: the last line has no final newline (30 of 30 fields)"
            ),
            "{error}"
        );
        // A header alone, cut before its newline, is refused too.
        let header = text.lines().next().unwrap();
        let error = error_of(&write_file(&dir, header));
        assert!(
            error.contains("line 1: the file ends inside its header"),
            "{error}"
        );
    }

    #[test]
    fn short_line_in_the_middle_is_not_called_truncation() {
        let text = good_text();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[2] = "prep,x,graph";
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, &(lines.join("\n") + "\n")));
        assert!(
            error.contains("line 3: 3 fields where the header has 30"),
            "{error}"
        );
    }

    #[test]
    fn unparsable_number_names_line_column_and_value() {
        let text = good_text().replacen(",21.25,", ",21.2x5,", 1);
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, &text));
        assert!(
            error.contains("line 2, column `median`: cannot read `21.2x5` as a number"),
            "{error}"
        );
    }

    #[test]
    fn a_line_is_named_past_blank_lines_with_either_line_end() {
        // The bad row is the third record, right below two blank lines (where the reader's
        // own count puts it: its reading starts there).
        let mut lines: Vec<String> = good_text().lines().map(str::to_string).collect();
        lines[3] = lines[3].replacen(",4.5,", ",4.x5,", 1);
        lines.insert(3, String::new());
        lines.insert(3, String::new());
        let dir = tempfile::tempdir().unwrap();
        for end in ["\n", "\r\n"] {
            let text = lines.join(end) + end;
            let error = error_of(&write_file(&dir, &text));
            assert!(
                error.contains("line 6, column `median`"),
                "{end:?}: {error}"
            );
        }
    }

    #[test]
    fn unparsable_count_and_flag_are_reported() {
        let text = good_text().replacen(",500,", ",-3,", 1);
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, &text));
        assert!(
            error.contains("column `samples`: cannot read `-3` as a whole number"),
            "{error}"
        );
        let text = good_text().replacen(",false,", ",maybe,", 1);
        let error = error_of(&write_file(&dir, &text));
        assert!(error.contains("column `emulated`"), "{error}");
        assert!(error.contains("`true` or `false`"), "{error}");
    }
}
