//! gitfleet reads YAML as kubectl does: a corpus of tricky scalars, keys, tags, anchors and merge
//! keys, read by gitfleet and compared with what kubectl sends for the same text.
//!
//! What kubectl sent is recorded in `tests/yaml/kubectl-corpus.json`, so the comparison holds
//! without kubectl; where kubectl is installed (CI has it) the test also runs it, against
//! `gitfleet sim`, and checks that kubectl still sends exactly the recording. Set
//! `GITFLEET_RECORD_KUBECTL=1` to rewrite the recording from kubectl.
//!
//! `kubectl create --dry-run=client -o json` prints the object after kubectl's own YAML to JSON
//! conversion (sigs.k8s.io/yaml), which is the body it sends; the live test checks that claim
//! against the body `--dry-run=server -v=9` logs.

mod common;
use common::kubectl::Kubectl as _;

use common::sim::SimFleet;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// Plain scalars, each the value of one key of a ConfigMap's `data` (kubectl validates nothing
/// of `data` client-side with `--validate=false`, so non-strings pass through).
const SCALARS: &[&str] = &[
    // YAML 1.1 booleans, and spellings that are not.
    "yes",
    "Yes",
    "YES",
    "yEs",
    "y",
    "Y",
    "n",
    "N",
    "no",
    "No",
    "NO",
    "on",
    "On",
    "ON",
    "oN",
    "off",
    "Off",
    "OFF",
    "true",
    "True",
    "TRUE",
    "tRue",
    "false",
    "False",
    "FALSE",
    // Nulls.
    "null",
    "Null",
    "NULL",
    "nULL",
    "~",
    "",
    // Integers: octal, hexadecimal, binary, underscores, signs, limits.
    "0755",
    "0o17",
    "0O17",
    "-0o17",
    "0o8",
    "0x1F",
    "0X1F",
    "+0x1F",
    "0x_1F",
    "0x",
    "0b101",
    "0B101",
    "-0b101",
    "+0b101",
    "0b-1",
    "1_000",
    "1__000",
    "_1",
    "1_",
    "0",
    "-0",
    "00",
    "09",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "12345678901234567890",
    "99999999999999999999",
    "0xFFFFFFFFFFFFFFFF",
    "0x8000000000000000",
    "-0x8000000000000000",
    // Floats.
    "1e3",
    "1E3",
    "1e+3",
    "1.0",
    "1.",
    ".5",
    "-.5",
    "+.5",
    "+1",
    "1e400",
    "08.5",
    "0.1",
    "1e-7",
    "1e21",
    "1e20",
    "3.14159265358979323846",
    "1_0.5",
    ".1_0",
    "._1",
    "1e",
    "1e3.5",
    ".e3",
    "1.e3",
    "0.0",
    "-0.0",
    "1.5e300",
    "4.9e-324",
    "0755.5",
    "1_2_3.4_5e1_0",
    // No base 60; timestamps and other look-alikes stay strings.
    "1:30",
    "190:20:30",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5",
    "=",
    "<<",
    "+-",
    "0.5.1",
    "v1",
    "1Gi",
    "500m",
    "#not",
];

/// Everything else: keys, tags, anchors, merge keys, quoting and block scalars.
const STRUCTURES: &str = r#"  keys:
    yes: a
    0755: b
    1.5: c
    1e3: d
    1e6: e
    0.00001: f
    123456789.0: g
    .inf: h
    -.inf: i
    .nan: j
    0.30000000000000004: k
    2001-12-14: l
    "quoted": m
    9223372036854775807: o
    -1: p
    1.0: q
    16777217.0: r
    false: s
  tags:
    s1: !!str yes
    s2: !!int "12"
    s3: !!float 1
    s4: !!bool yes
    s5: !!binary aGVsbG8=
    s6: ! 12
    s7: !custom 12
    s8: !!float "1.5"
    s9: !!timestamp 2001-12-14
    s10: !!null ~
    s11: !!str
    s12: !!int 0x10
    s13: !!map {a: 1}
    s14: !!seq [1]
    s15: !<tag:yaml.org,2002:int> "7"
    s16: !!str 0755
  anchors:
    base: &b {x: 1, k: yes}
    m1: {<<: *b, z: 2}
    m2: {x: 0, <<: *b}
    m3: {<<: *b, x: 9}
    m4: {<<: [*b, {x: 5, w: 6}]}
    m5: {<<: [{x: 5, w: 6}, *b]}
    s: &s hello
    a: *s
    q: "<<"
    m6: {"<<": *b}
    m7: {!!merge <<: *b}
    list: &l [1, on]
    again: *l
  quoting:
    lit: |
      yes
    keep: |+
      0755

    fold: >-
      0755
      on
    sq: 'on'
    dq: "0x1F"
    escaped: "tab\there \u00e9"
  flow: {a: [yes, 0755, ~], b: {c: off}}
"#;

/// Documents kubectl refuses (and gitfleet must too).
const REFUSED: &[(&str, &str)] = &[
    ("infinity", "  a: .inf\n"),
    ("NaN", "  a: .nan\n"),
    ("null key", "  ~: x\n"),
    ("uint64 key", "  18446744073709551615: x\n"),
    ("mapping key", "  ? {a: 1}\n  : x\n"),
    ("unknown alias", "  a: *nope\n"),
    ("bad !!int", "  a: !!int abc\n"),
    ("bad !!float", "  a: !!float yes\n"),
    ("bad !!bool", "  a: !!bool 1\n"),
    ("bad !!binary", "  a: !!binary \"!!!\"\n"),
    ("bad !!null", "  a: !!null 5\n"),
    ("merge of a scalar", "  <<: 5\n"),
    ("recursive anchor", "  a: &x [*x]\n"),
];

fn document(data: &str, name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n{data}")
}

fn corpus() -> String {
    let mut data = String::new();
    for (i, s) in SCALARS.iter().enumerate() {
        data.push_str(&format!("  k{i:03}: {s}\n"));
    }
    data.push_str(STRUCTURES);
    document(&data, "corpus")
}

/// Numbers compared as Kubernetes compares them: an integer that fits int64, else a float.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => json!(i),
            None => json!(n.as_f64()),
        },
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), canonical(v))).collect())
        }
        other => other.clone(),
    }
}

fn gitfleet_reads(text: &str) -> Result<Value, String> {
    let mut docs = gitfleet::yaml::documents(text).map_err(|e| e.to_string())?;
    assert_eq!(docs.len(), 1, "{text}");
    Ok(canonical(&docs.remove(0)))
}

/// The recording: kubectl's object for the corpus, and which refused documents it refused.
fn recording_path() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/yaml/kubectl-corpus.json"
    ))
}

fn recording() -> Value {
    let text = std::fs::read_to_string(recording_path()).expect("the recording exists");
    serde_json::from_str(&text).expect("the recording is JSON")
}

/// Each data key of the corpus with the scalar text it was written as, for messages.
fn explain(key: &str) -> String {
    key.strip_prefix('k')
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| SCALARS.get(i))
        .map_or_else(|| key.to_string(), |s| format!("{key} (`{s}`)"))
}

fn differences(want: &Value, got: &Value) -> Vec<String> {
    let (Some(want), Some(got)) = (want["data"].as_object(), got["data"].as_object()) else {
        return vec![format!("want {want}\ngot  {got}")];
    };
    let mut out = Vec::new();
    for (k, w) in want {
        let g = got.get(k).unwrap_or(&Value::Null);
        if w != g || !got.contains_key(k) {
            out.push(format!("{}: kubectl {w}, gitfleet {g}", explain(k)));
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        out.push(format!("{k}: only gitfleet has it"));
    }
    out
}

#[test]
fn gitfleet_reads_the_corpus_as_kubectl_sent_it() {
    assert!(SCALARS.len() >= 100, "the corpus keeps its size");
    let recorded = recording();
    let got = gitfleet_reads(&corpus()).expect("gitfleet reads the corpus");
    let diffs = differences(&canonical(&recorded["corpus"]), &got);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    for (name, data) in REFUSED {
        assert_eq!(
            recorded["refused"][name]["kubectl_refused"],
            json!(true),
            "{name}: the recording says kubectl accepted it"
        );
        let read = gitfleet_reads(&document(data, "refused"));
        assert!(read.is_err(), "{name}: gitfleet read {read:?}");
    }
}

/// kubectl, when it is installed.
fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

const FLEET: &str =
    "anonymousAuth: true\nmembers:\n  - name: alpha\n    nodes:\n      - count: 1\n";

/// `kubectl create --dry-run=client -o json` of `yaml`: the object, or kubectl's error.
fn kubectl_reads(sim: &SimFleet, yaml: &str) -> Result<Value, String> {
    let (code, out, err) = sim.kubectl_stdin(
        "alpha",
        &[
            "create",
            "--dry-run=client",
            "--validate=false",
            "-o",
            "json",
            "-f",
            "-",
        ],
        yaml,
    );
    if code != 0 {
        return Err(err);
    }
    let mut v: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    // Only what the text says; kubectl fills in nothing else with --dry-run=client.
    if let Some(meta) = v["metadata"].as_object_mut() {
        meta.remove("creationTimestamp");
    }
    Ok(v)
}

/// The request body `kubectl create --dry-run=server -v=9` logs (-v=8 cuts long bodies short).
fn kubectl_sends(sim: &SimFleet, yaml: &str) -> Value {
    let (code, _, err) = sim.kubectl_stdin(
        "alpha",
        &[
            "create",
            "--dry-run=server",
            "-o",
            "json",
            "-v=9",
            "-f",
            "-",
        ],
        yaml,
    );
    assert_eq!(code, 0, "kubectl create --dry-run=server failed: {err}");
    let mut lines = err.lines();
    while let Some(line) = lines.next() {
        if line.contains("\"Request Body\"") && line.trim_end().ends_with("body=<") {
            if let Some(body) = lines.next() {
                if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
                    if v["kind"] == "ConfigMap" {
                        return v;
                    }
                }
            }
        }
    }
    panic!("no ConfigMap request body in kubectl's -v=9 log:\n{err}");
}

#[test]
fn kubectl_still_sends_the_recording() {
    if !kubectl_available() {
        eprintln!("kubectl is not installed: the corpus was compared with the recording only");
        return;
    }
    let sim = SimFleet::start(FLEET);
    let corpus = corpus();
    let from_kubectl = kubectl_reads(&sim, &corpus).expect("kubectl reads the corpus");
    let mut refused = serde_json::Map::new();
    for (name, data) in REFUSED {
        let result = kubectl_reads(&sim, &document(data, "refused"));
        refused.insert(
            name.to_string(),
            json!({"kubectl_refused": result.is_err(), "kubectl_says": result.err().unwrap_or_default().trim()}),
        );
    }
    let live = json!({"kubectl": kubectl_version(), "corpus": from_kubectl, "refused": refused});
    if std::env::var_os("GITFLEET_RECORD_KUBECTL").is_some() {
        let text = serde_json::to_string_pretty(&live).unwrap() + "\n";
        std::fs::write(recording_path(), text).expect("the recording is written");
    }
    let recorded = recording();
    let diffs = differences(&canonical(&recorded["corpus"]), &canonical(&from_kubectl));
    assert!(
        diffs.is_empty(),
        "kubectl {} no longer sends the recording (GITFLEET_RECORD_KUBECTL=1 rewrites it):\n{}",
        kubectl_version(),
        diffs.join("\n")
    );
    for (name, _) in REFUSED {
        assert_eq!(
            live["refused"][name]["kubectl_refused"],
            json!(true),
            "{name}: kubectl accepts it now"
        );
    }
    // gitfleet against kubectl directly, too.
    let diffs = differences(&canonical(&from_kubectl), &gitfleet_reads(&corpus).unwrap());
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    // The body sent to the server is the object --dry-run=client prints.
    let sent = kubectl_sends(&sim, &corpus);
    let diffs = differences(&canonical(&from_kubectl), &canonical(&sent));
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// What gitfleet writes (`-o yaml`), kubectl reads back as the same strings: every corpus text
/// and a few more that only quoting keeps strings.
#[test]
fn kubectl_reads_what_gitfleet_writes() {
    let mut data = serde_json::Map::new();
    let texts: Vec<String> = SCALARS
        .iter()
        .map(|s| s.to_string())
        .chain(
            [
                "multi\nline\n",
                "multi\nline",
                "x\n\n",
                " lead",
                "trail ",
                "a: b",
                "- x",
                "tab\tx",
                "quote\"s",
            ]
            .map(String::from),
        )
        .chain([format!("{} {} end", "word ".repeat(30), "x".repeat(90))])
        .collect();
    for (i, s) in texts.iter().enumerate() {
        data.insert(format!("k{i:03}"), json!(s));
    }
    let object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "written", "namespace": "default"},
        "data": data,
    });
    let text = gitfleet::yaml::to_string(&object).expect("gitfleet writes YAML");
    assert_eq!(gitfleet_reads(&text).unwrap(), object, "{text}");
    if !kubectl_available() {
        eprintln!("kubectl is not installed: gitfleet read its own output back only");
        return;
    }
    let sim = SimFleet::start(FLEET);
    let back = kubectl_reads(&sim, &text).expect("kubectl reads gitfleet's YAML");
    let diffs = differences(&object, &back);
    assert!(diffs.is_empty(), "{text}\n{}", diffs.join("\n"));
}

fn kubectl_version() -> String {
    Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
        .and_then(|v| v["clientVersion"]["gitVersion"].as_str().map(String::from))
        .unwrap_or_default()
}
