//! Where the timeline chart puts things, read back from its SVG: every span's name sits
//! inside that span's own box, in a colour that reads on it.

use metaprep::report::charts::{timeline_chart, Rendered};
use metaprep::results::env::EnvRecord;

/// Two stacked panels (eager-sync above graph, as a steps run writes them) of three steps:
/// a wide host read, a wide verify forward, narrow spans too small to be named.
fn trace(title: &str, read_us: f64) -> String {
    let mut events = vec![
        r#"{"ph":"M","name":"process_name","pid":1,"args":{"name":"host"}}"#.to_string(),
        r#"{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"blocked in read"}}"#
            .into(),
        r#"{"ph":"M","name":"process_name","pid":2,"args":{"name":"GPU"}}"#.into(),
        r#"{"ph":"M","name":"thread_name","pid":2,"tid":7,"args":{"name":"stream 7"}}"#.into(),
    ];
    for step in 0..3 {
        let t = 1_000.0 + 400.0 * f64::from(step);
        for (pid, tid, name, ts, dur) in [
            (1, 1, "seq_lens.tolist()", t, read_us),
            (2, 7, "draft forward", t + 5.0, 30.0),
            (2, 7, "verify forward", t + 150.0, 200.0),
            (2, 7, "accept", t + 352.0, 3.0),
        ] {
            events.push(format!(
                r#"{{"ph":"X","name":"{name}","pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur},"args":{{"step":{step}}}}}"#
            ));
        }
    }
    format!(
        r#"{{"traceEvents":[{}],"otherData":{{"title":"{title}"}}}}"#,
        events.join(",")
    )
}

/// `(x, y, width, height, fill)` of every filled rectangle.
fn rects(svg: &str) -> Vec<(f64, f64, f64, f64, String)> {
    svg.split("<rect ")
        .skip(1)
        .filter_map(|tag| {
            let tag = &tag[..tag.find('>')?];
            let num = |name: &str| attribute(tag, name)?.parse::<f64>().ok();
            let fill = attribute(tag, "fill")?;
            (fill != "none").then_some((
                num("x")?,
                num("y")?,
                num("width")?,
                num("height")?,
                fill.to_string(),
            ))
        })
        .collect()
}

/// `(x, y, fill, text)` of every `<text>` element.
fn texts(svg: &str) -> Vec<(f64, f64, String, String)> {
    svg.split("<text ")
        .skip(1)
        .filter_map(|tag| {
            let (open, rest) = tag.split_once('>')?;
            let body = rest[..rest.find("</text>")?].trim().to_string();
            let num = |name: &str| attribute(open, name)?.parse::<f64>().ok();
            Some((
                num("x")?,
                num("y")?,
                attribute(open, "fill")?.to_string(),
                body,
            ))
        })
        .collect()
}

/// The value of attribute `name` in a tag's attributes (`x="1" y="2" ...`).
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag
        .split(' ')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\""))?;
    start.split('"').next()
}

#[test]
fn span_names_sit_inside_their_own_boxes() {
    let dir = tempfile::tempdir().unwrap();
    // One chart of two panels: the second panel's labels are where a wrong origin shows most.
    let traces = [
        trace("eager-sync: tp8 bs 1", 140.0),
        trace("graph: tp8 bs 1", 2.0),
    ];
    let rendered = metaprep::report::charts::render_all(
        dir.path(),
        &[],
        &EnvRecord::default(),
        &[],
        &[("trace.json", &traces[0]), ("trace-graph.json", &traces[1])],
    )
    .unwrap();
    assert!(
        rendered.files.iter().any(|f| f.ends_with("timeline.svg")),
        "{rendered:?}"
    );
    let svg = std::fs::read_to_string(dir.path().join("charts/timeline.svg")).unwrap();
    let boxes = rects(&svg);
    let labels: Vec<_> = texts(&svg)
        .into_iter()
        .filter(|(_, _, _, text)| {
            ["seq_lens.tolist()", "verify forward", "draft forward"].contains(&text.as_str())
        })
        .collect();
    // The legend (under the 64 px title, 30 px high) names the spans too; the labels in the
    // boxes are below it.
    const LEGEND_BOTTOM: f64 = 94.0;
    let in_boxes: Vec<_> = labels
        .iter()
        .filter(|(_, y, _, _)| *y > LEGEND_BOTTOM)
        .collect();
    // verify forward: 3 steps x 2 panels; seq_lens.tolist(): 3 (eager-sync only, the graph's
    // reads are too short to name); draft forward, ~28 px wide, too narrow for its name.
    let count = |name: &str| in_boxes.iter().filter(|l| l.3 == name).count();
    assert_eq!(
        (
            count("verify forward"),
            count("seq_lens.tolist()"),
            count("draft forward")
        ),
        (6, 3, 0),
        "{in_boxes:?}"
    );
    for (x, y, fill, name) in in_boxes {
        // The smallest box holding the label (the canvas and the plot area hold it too).
        let inside = boxes
            .iter()
            .filter(|(bx, by, w, h, _)| *bx <= *x && *x <= bx + w && *by <= *y && *y <= by + h)
            .min_by(|a, b| (a.2 * a.3).total_cmp(&(b.2 * b.3)));
        let Some((bx, _, _, _, box_fill)) = inside else {
            panic!("{name} at ({x}, {y}) lies in no box");
        };
        // 5 px into its box, on the box's colour: its own span's box, not a neighbour's.
        assert!(
            (x - bx - 5.0).abs() <= 1.0,
            "{name} at x {x}, its box starts at {bx}"
        );
        let text_on = |fill: &str| {
            let c = u32::from_str_radix(fill.trim_start_matches('#'), 16).unwrap();
            let (r, g, b) = (c >> 16, (c >> 8) & 0xff, c & 0xff);
            0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b)
        };
        let contrast = (text_on(fill) - text_on(box_fill)).abs();
        assert!(contrast > 100.0, "{name}: {fill} on {box_fill}");
    }
    // The legend still names every span.
    let legend = texts(&svg)
        .into_iter()
        .filter(|(_, y, _, text)| *y < LEGEND_BOTTOM && text == "verify forward")
        .count();
    assert_eq!(legend, 1);
    let single = timeline_chart(dir.path(), &traces[0], &EnvRecord::default()).unwrap();
    assert!(matches!(single, Rendered::Files { .. }));
}
