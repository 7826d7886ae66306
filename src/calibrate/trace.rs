//! Reading a Chrome trace (torch.profiler's `export_chrome_trace`) into typed events, one
//! event at a time: a 100 MB trace is never held as one JSON value, only the events kept.

use anyhow::{anyhow, Context, Result};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// A closed interval of trace time, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub ts: f64,
    pub end: f64,
}

/// How far apart two times may be and still be the same: Chrome traces print µs with three
/// decimals (so a start plus a duration is off by up to 1 ns), and torch's timestamps count
/// from the epoch (~5e12 µs), where an f64 resolves about 1 ns. A tolerance relative to the
/// timestamp itself (1e-6 × 5e12 µs = 5 s) would make every event "inside" every span.
pub fn tol(t: f64) -> f64 {
    0.002 + 2.0 * f64::EPSILON * t.abs()
}

impl Span {
    pub fn dur(self) -> f64 {
        self.end - self.ts
    }

    pub fn contains(self, other: Span) -> bool {
        other.ts >= self.ts - tol(self.ts) && other.end <= self.end + tol(self.end)
    }
}

/// The event categories read; everything else is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cat {
    CpuOp,
    Annotation,
    Python,
    Runtime,
    Kernel,
    Memcpy,
    Memset,
}

impl Cat {
    fn of(cat: &str) -> Option<Cat> {
        Some(match cat {
            "cpu_op" | "Operator" => Cat::CpuOp,
            "user_annotation" => Cat::Annotation,
            "python_function" => Cat::Python,
            "cuda_runtime" | "cuda_driver" | "Runtime" => Cat::Runtime,
            "kernel" | "Kernel" => Cat::Kernel,
            "gpu_memcpy" | "Memcpy" => Cat::Memcpy,
            "gpu_memset" | "Memset" => Cat::Memset,
            _ => return None,
        })
    }
}

/// A host event of one thread.
#[derive(Debug, Clone)]
pub struct HostEvent {
    pub name: String,
    pub span: Span,
    /// `args.correlation`: ties a runtime call to the GPU work it launched.
    pub corr: Option<u64>,
}

/// One thread's host events, each list sorted by start (the longest first on ties, so an
/// event comes before the events nested in it).
#[derive(Debug, Default)]
pub struct ThreadEvents {
    pub ops: Vec<HostEvent>,
    pub annotations: Vec<HostEvent>,
    pub runtime: Vec<HostEvent>,
    /// Python frames (`with_stack=True`): `file.py(line): function`.
    pub python: Vec<HostEvent>,
}

/// GPU work: a kernel, copy or memset.
#[derive(Debug, Clone, Copy)]
pub struct GpuEvent {
    pub span: Span,
    pub corr: Option<u64>,
}

#[derive(Debug, Default)]
pub struct Trace {
    pub threads: BTreeMap<(String, String), ThreadEvents>,
    /// Sorted by start.
    pub gpu: Vec<GpuEvent>,
    /// The name of each GPU copy by correlation (`Memcpy HtoD (Pageable -> Device)`).
    pub memcpy_by_corr: BTreeMap<u64, String>,
    pub any_runtime: bool,
}

/// What a runtime or driver call does, by its name: launch work, replay a graph, block the
/// host until the GPU catches up (a sync, or a copy the runtime makes synchronous), copy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RtKind {
    pub launch: bool,
    pub graph: bool,
    pub sync: bool,
    pub memcpy: bool,
}

pub fn rt_kind(name: &str) -> RtKind {
    RtKind {
        launch: name.starts_with("cudaLaunchKernel")
            || name.starts_with("cuLaunchKernel")
            || name.starts_with("cudaLaunchCooperativeKernel"),
        graph: name == "cudaGraphLaunch" || name == "cuGraphLaunch",
        sync: matches!(
            name,
            "cudaStreamSynchronize"
                | "cudaDeviceSynchronize"
                | "cudaEventSynchronize"
                | "cudaMemcpy"
                | "cudaMemcpy2D"
                | "cuStreamSynchronize"
                | "cuCtxSynchronize"
                | "cuEventSynchronize"
                | "cuMemcpyDtoH_v2"
        ),
        memcpy: name == "cudaMemcpyAsync" || name == "cudaMemcpy",
    }
}

pub fn is_profiler_step(name: &str) -> bool {
    name.strip_prefix("ProfilerStep#")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The largest time of an event, µs from the profiler's origin: 3,000 years of the epoch
/// clock torch.profiler's times count from.
const MAX_TS_US: f64 = 1e17;
/// The longest event, µs: a day, longer than any decode loop is profiled for.
const MAX_DUR_US: f64 = 8.64e10;

/// Refuses an event whose times no profiler gives.
fn in_range(ts: f64, dur: f64) -> std::result::Result<(), String> {
    if dur < 0.0 {
        return Err(format!("negative `dur` {dur}"));
    }
    if ts.abs() > MAX_TS_US || dur > MAX_DUR_US {
        return Err(format!(
            "`ts` {ts} or `dur` {dur} µs is out of range (a profiler's times lie within \
             ±{MAX_TS_US:e} µs, an event lasts at most {MAX_DUR_US:e} µs): the trace's times are \
             damaged"
        ));
    }
    Ok(())
}

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

impl Trace {
    /// Reads `path`, streaming its events, through gunzip where its bytes are gzip's
    /// ([`is_gzip`](crate::results::compressed::is_gzip); torch.profiler's
    /// `export_chrome_trace("t.json.gz")` writes one); every failure is one line naming the
    /// file.
    pub fn read(path: &Path) -> Result<Trace> {
        use std::io::BufRead;
        let file = path.display().to_string();
        let f = File::open(path).with_context(|| format!("{file}: cannot open the trace"))?;
        let mut reader = BufReader::with_capacity(1 << 20, f);
        let start = reader
            .fill_buf()
            .with_context(|| format!("{file}: cannot read the trace"))?;
        if crate::results::compressed::is_gzip(start) {
            let unzipped = flate2::read::MultiGzDecoder::new(reader);
            return Self::from_reader(&file, BufReader::new(unzipped));
        }
        // A byte-order mark some editors write is no part of the JSON.
        if start.starts_with(UTF8_BOM) {
            reader.consume(UTF8_BOM.len());
        }
        Self::from_reader(&file, reader)
    }

    pub fn from_reader(file: &str, reader: impl std::io::Read) -> Result<Trace> {
        let mut builder = Builder {
            file,
            trace: Trace::default(),
            error: None,
            index: 0,
        };
        let mut de = serde_json::Deserializer::from_reader(reader);
        let outcome = Root(&mut builder)
            .deserialize(&mut de)
            .and_then(|()| de.end());
        if let Some(e) = builder.error.take() {
            return Err(e);
        }
        match outcome {
            Ok(()) => {}
            Err(e) if e.is_data() => return Err(anyhow!("{file}: {e}")),
            Err(e) => return Err(anyhow!("{file}: not a JSON trace: {e}")),
        }
        builder.trace.sort();
        Ok(builder.trace)
    }

    fn sort(&mut self) {
        let by_start = |a: &HostEvent, b: &HostEvent| {
            a.span
                .ts
                .total_cmp(&b.span.ts)
                .then(b.span.end.total_cmp(&a.span.end))
        };
        for thread in self.threads.values_mut() {
            thread.ops.sort_by(by_start);
            thread.annotations.sort_by(by_start);
            thread.runtime.sort_by(by_start);
            thread.python.sort_by(by_start);
        }
        self.gpu.sort_by(|a, b| a.span.ts.total_cmp(&b.span.ts));
    }
}

/// Collects events as the deserializer hands them over; the first bad event stops it.
struct Builder<'f> {
    file: &'f str,
    trace: Trace,
    error: Option<anyhow::Error>,
    index: usize,
}

impl Builder<'_> {
    fn event(&mut self, event: Value) -> Result<()> {
        let i = self.index;
        self.index += 1;
        let file = self.file;
        let obj = (event.as_object()).ok_or_else(|| {
            anyhow!(
                "{file}: traceEvents[{i}] is {}, not an event object",
                json_kind(&event)
            )
        })?;
        if obj.get("ph").and_then(Value::as_str) != Some("X") {
            return Ok(());
        }
        let Some(cat) = obj.get("cat").and_then(Value::as_str).and_then(Cat::of) else {
            return Ok(());
        };
        let at = |what: &str| format!("{file}: traceEvents[{i}] ({what})");
        let name = match obj.get("name") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                return Err(anyhow!(
                    "{}: `name` is {}, not a string",
                    at("a complete event"),
                    json_kind(v)
                ))
            }
            None => return Err(anyhow!("{}: no `name`", at("a complete event"))),
        };
        let number = |key: &str| -> Result<f64> {
            match obj.get(key) {
                Some(Value::Number(n)) => n
                    .as_f64()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| anyhow!("{}: `{key}` = {n} is not finite", at(&name))),
                Some(v) => Err(anyhow!(
                    "{}: `{key}` is {}, not a number",
                    at(&name),
                    json_kind(v)
                )),
                None => Err(anyhow!("{}: no `{key}`", at(&name))),
            }
        };
        let ts = number("ts")?;
        let dur = number("dur")?;
        in_range(ts, dur).map_err(|e| anyhow!("{}: {e}", at(&name)))?;
        let span = Span { ts, end: ts + dur };
        let corr = correlation(obj.get("args")).map_err(|e| anyhow!("{}: {e}", at(&name)))?;
        let trace = &mut self.trace;
        match cat {
            Cat::Kernel | Cat::Memcpy | Cat::Memset => {
                if let (Cat::Memcpy, Some(c)) = (cat, corr) {
                    trace.memcpy_by_corr.insert(c, name);
                }
                trace.gpu.push(GpuEvent { span, corr });
            }
            _ => {
                let id = |key: &str| -> Result<String> {
                    match obj.get(key) {
                        Some(Value::Number(n)) => Ok(n.to_string()),
                        Some(Value::String(s)) => Ok(s.clone()),
                        Some(v) => Err(anyhow!(
                            "{}: `{key}` is {}, not a number or a string",
                            at(&name),
                            json_kind(v)
                        )),
                        None => Err(anyhow!("{}: no `{key}`", at(&name))),
                    }
                };
                let thread = trace.threads.entry((id("pid")?, id("tid")?)).or_default();
                let event = HostEvent { name, span, corr };
                match cat {
                    Cat::CpuOp if is_profiler_step(&event.name) => thread.annotations.push(event),
                    Cat::CpuOp => thread.ops.push(event),
                    Cat::Annotation => thread.annotations.push(event),
                    Cat::Python => thread.python.push(event),
                    _ => {
                        trace.any_runtime = true;
                        thread.runtime.push(event)
                    }
                }
            }
        }
        Ok(())
    }
}

/// The document: `{"traceEvents": [...], ...}` or a bare array of events.
struct Root<'b, 'f>(&'b mut Builder<'f>);

impl<'de> DeserializeSeed<'de> for Root<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Root<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object with `traceEvents` or an array of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Events(self.0).visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "traceEvents" {
                map.next_value_seed(Events(&mut *self.0))?;
                found = true;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if !found {
            return Err(de::Error::custom(
                "no `traceEvents` array: not a Chrome trace (torch.profiler's export_chrome_trace writes one)",
            ));
        }
        Ok(())
    }
}

/// The `traceEvents` array, handed to the builder one event at a time.
struct Events<'b, 'f>(&'b mut Builder<'f>);

impl<'de> DeserializeSeed<'de> for Events<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Events<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("`traceEvents` as an array of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(event) = seq.next_element::<Value>()? {
            if let Err(e) = self.0.event(event) {
                self.0.error = Some(e);
                return Err(de::Error::custom("stopped at a bad event"));
            }
        }
        Ok(())
    }
}

/// An event's `args.correlation` (what ties a runtime call to the GPU work it launched), where
/// it has one; `args` that is not an object, or a correlation that is not a whole number, is
/// refused.
fn correlation(args: Option<&Value>) -> Result<Option<u64>, String> {
    let args = match args {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(args)) => args,
        Some(v) => return Err(format!("`args` is {}, not an object", json_kind(v))),
    };
    match args.get("correlation") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => (n.as_u64().map(Some))
            .ok_or_else(|| format!("`args.correlation` = {n} is not a whole number")),
        Some(v) => Err(format!(
            "`args.correlation` is {}, not a number",
            json_kind(v)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gzipped_trace_reads_as_the_plain_one() {
        use std::io::Write;
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_trace_small.json"),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (plain, gz) = (dir.path().join("t.json"), dir.path().join("t.json.gz"));
        std::fs::write(&plain, &text).unwrap();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text.as_bytes()).unwrap();
        std::fs::write(&gz, encoder.finish().unwrap()).unwrap();
        let (a, b) = (Trace::read(&plain).unwrap(), Trace::read(&gz).unwrap());
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        // What the bytes are decides, not the name: a plain trace named `.gz`, or one with a
        // byte-order mark, reads as the plain one; gzip's magic before garbage is named.
        std::fs::write(&gz, &text).unwrap();
        assert_eq!(format!("{a:?}"), format!("{:?}", Trace::read(&gz).unwrap()));
        std::fs::write(&plain, [b"\xEF\xBB\xBF", text.as_bytes()].concat()).unwrap();
        assert_eq!(
            format!("{a:?}"),
            format!("{:?}", Trace::read(&plain).unwrap())
        );
        std::fs::write(&gz, b"\x1f\x8b\x08\x00garbage").unwrap();
        let e = format!("{:#}", Trace::read(&gz).unwrap_err());
        assert!(
            e.contains("t.json.gz") && e.contains("not a JSON trace"),
            "{e}"
        );
    }

    fn read(text: &str) -> Result<Trace> {
        Trace::from_reader("t.json", text.as_bytes())
    }

    fn err(text: &str) -> String {
        let e = format!("{:#}", read(text).unwrap_err());
        assert!(e.starts_with("t.json: ") && !e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn reads_an_object_or_a_bare_array_and_keeps_only_complete_known_events() {
        let events = r#"[
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 2, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": 1, "args": {"correlation": 7}},
            {"ph": "i", "cat": "cpu_op", "name": "instant", "ts": 1, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "python_function", "name": "f", "ts": 1, "dur": 9, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#3", "ts": 0, "dur": 9, "pid": 1, "tid": 1}
        ]"#;
        for text in [
            events.to_string(),
            format!(
                r#"{{"schemaVersion": 1, "traceEvents": {events}, "deviceProperties": [{{"id": 0}}]}}"#
            ),
        ] {
            let t = read(&text).unwrap();
            let th = &t.threads[&("1".to_string(), "1".to_string())];
            assert_eq!(th.ops.len(), 1);
            assert_eq!(th.annotations.len(), 1, "ProfilerStep#N is an annotation");
            assert_eq!(t.gpu.len(), 1);
            assert_eq!(t.gpu[0].corr, Some(7));
        }
    }

    #[test]
    fn containment_holds_to_a_nanosecond_at_epoch_timestamps() {
        let t0 = 5_257_213_846_604.348; // a torch 2.11 trace's first event, µs
        let outer = Span {
            ts: t0,
            end: t0 + 10.0,
        };
        let touching = Span {
            ts: t0 + 4.0,
            end: t0 + 10.001,
        };
        let after = Span {
            ts: t0 + 10.5,
            end: t0 + 11.0,
        };
        assert!(outer.contains(touching));
        assert!(!outer.contains(after), "5 us later is not inside");
        assert!(!outer.contains(Span {
            ts: t0 - 0.01,
            end: t0 + 1.0
        }));
    }

    #[test]
    fn bad_documents_and_events_are_one_line_naming_the_file() {
        assert!(err("{").contains("not a JSON trace"));
        assert!(err(r#"{"other": 1}"#).contains("no `traceEvents`"));
        assert!(err(r#"{"traceEvents": "x"}"#).contains("array of events"));
        assert!(err(r#"[1]"#).contains("traceEvents[0] is a number"));
        let bad_dur = r#"[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": -1, "pid": 1, "tid": 1}]"#;
        assert!(err(bad_dur).contains("negative `dur`"));
        let no_tid = r#"[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "pid": 1}]"#;
        assert!(err(no_tid).contains("no `tid`"));
        let bad_corr = r#"[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"correlation": "x"}}]"#;
        assert!(err(bad_corr).contains("`args.correlation` is a string"));
        let bad_args =
            r#"[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": "x"}]"#;
        assert!(err(bad_args).contains("`args` is a string, not an object"));
        assert!(err("[] []").contains("not a JSON trace"), "trailing data");
    }

    #[test]
    fn times_out_of_a_profilers_range_are_refused_as_damaged() {
        for (ts, dur) in [
            ("1e300", "1"),
            ("-1e300", "1"),
            ("1", "1e300"),
            ("1.7e15", "1e12"),
        ] {
            let event = format!(
                r#"[{{"ph": "X", "cat": "cpu_op", "name": "a", "ts": {ts}, "dur": {dur}, "pid": 1, "tid": 1}}]"#
            );
            assert!(
                err(&event).contains("out of range"),
                "{ts} {dur}: {}",
                err(&event)
            );
        }
        // An epoch-based time of today, a second long, reads.
        let today = r#"[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1.77e15, "dur": 1e6, "pid": 1, "tid": 1}]"#;
        assert!(Trace::from_reader("t.json", today.as_bytes()).is_ok());
    }

    #[test]
    fn a_gzipped_trace_reads_whatever_its_name_says() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let doc = r#"[{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]"#;
        for name in ["t.json", "t.json.gz", "trace"] {
            let path = dir.path().join(name);
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(doc.as_bytes()).unwrap();
            std::fs::write(&path, gz.finish().unwrap()).unwrap();
            let trace = Trace::read(&path).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(trace.threads.len(), 1, "{name}");
        }
        let empty = dir.path().join("empty.json");
        std::fs::write(&empty, "").unwrap();
        assert!(Trace::read(&empty).is_err());
    }
}
