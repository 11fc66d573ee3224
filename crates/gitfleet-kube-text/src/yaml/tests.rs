//! Reading and writing, end to end through the module's API. The scalar rules themselves are
//! tested in `resolve`; what kubectl makes of a corpus is compared in `tests/yaml_kubectl.rs`.

use super::*;
use serde_json::json;

fn one(text: &str) -> Document {
    let (mut docs, errors) = stream(text);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(docs.len(), 1, "{docs:?}");
    docs.remove(0)
}

fn errors_of(text: &str) -> Vec<DocumentError> {
    stream(text).1
}

#[test]
fn streams_split_into_documents_with_their_first_line() {
    let text = "# header\na: 1\n---\n\n---\nb: 2\n--- {c: 3}\n...\n";
    let (docs, errors) = stream(text);
    assert!(errors.is_empty(), "{errors:?}");
    let got: Vec<(usize, usize, Value)> = docs
        .iter()
        .filter(|d| !d.value.is_null())
        .map(|d| (d.index, d.line, d.value.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 2, json!({"a": 1})),
            (2, 6, json!({"b": 2})),
            (3, 7, json!({"c": 3})),
        ]
    );
    // Comments only, or nothing: no document with a value.
    assert!(documents("# nothing\n").unwrap().is_empty());
    assert!(documents("").unwrap().is_empty());
}

#[test]
fn a_broken_document_is_reported_at_its_line_and_the_next_ones_are_read() {
    let text = "a: 1\n---\nb: [unclosed\nc: 2\n---\nd: 4\n";
    let (docs, errors) = stream(text);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].index, 1);
    assert!((3..=4).contains(&errors[0].line), "{errors:?}");
    let values: Vec<&Value> = docs.iter().map(|d| &d.value).collect();
    assert_eq!(values, [&json!({"a": 1}), &json!({"d": 4})]);
    assert_eq!(docs[1].index, 2);
}

#[test]
fn duplicate_keys_are_errors_at_the_second_key() {
    let errors = errors_of("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n");
    let got: Vec<(usize, &str)> = errors
        .iter()
        .map(|e| (e.line, e.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (4, "duplicate key \"c\" (first written at line 3)"),
            (5, "duplicate key \"a\" (first written at line 1)"),
        ]
    );
}

#[test]
fn every_problem_of_a_document_is_reported_and_deep_nesting_is_bounded() {
    // A duplicate key before a syntax error: both are reported.
    let errors = errors_of("a: 1\na: 2\nb: [\n");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0].line, 2);
    // Nesting deeper than 128 levels is an error (as it was with serde_yaml, and as serde_json
    // has it), not a stack overflow, in flow and block style.
    let flow = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
    assert_eq!(documents(&flow(128)).unwrap().len(), 1);
    let e = documents(&flow(129)).unwrap_err();
    assert!(e.message.contains("deeper than 128"), "{e}");
    assert!(documents(&flow(5000)).is_err());
    let block =
        |d: usize| -> String { (0..d).map(|i| format!("{}k:\n", "  ".repeat(i))).collect() };
    assert_eq!(documents(&block(128)).unwrap().len(), 1);
    assert_eq!(documents(&block(129)).unwrap_err().line, Some(128));
}

#[test]
fn merge_keys_follow_go_yaml_v2() {
    // The cases kubectl was seen to read this way (tests/yaml_kubectl.rs checks them live).
    let d = one(concat!(
        "base: &b {x: 1, k: 2}\n",
        "m1: {<<: *b, z: 3}\n",
        "m2: {x: 0, <<: *b}\n",
        "m3: {<<: *b, x: 9}\n",
        "m4: {<<: [*b, {x: 5, w: 6}]}\n",
        "m5: {<<: [{x: 5, w: 6}, *b]}\n",
        "m6: {\"<<\": 1}\n",
        "m7: {!!merge <<: *b}\n",
    ));
    assert_eq!(d.value["m1"], json!({"x": 1, "k": 2, "z": 3}));
    assert_eq!(d.value["m2"], json!({"x": 1, "k": 2}));
    assert_eq!(d.value["m3"], json!({"x": 9, "k": 2}));
    assert_eq!(d.value["m4"], json!({"x": 1, "k": 2, "w": 6}));
    assert_eq!(d.value["m5"], json!({"x": 5, "k": 2, "w": 6}));
    assert_eq!(d.value["m6"], json!({"<<": 1}));
    assert_eq!(d.value["m7"], json!({"x": 1, "k": 2}));
    // Merged entries are where their anchor wrote them; an overriding key where it is.
    assert_eq!(d.positions.line(&d.value, "m1.k"), Some(1));
    assert_eq!(d.positions.line(&d.value, "m1.z"), Some(2));
    assert_eq!(d.positions.line(&d.value, "m3.x"), Some(4));
    assert!(errors_of("a: {<<: 5}\n")[0].message.contains("merge key"));
}

#[test]
fn aliases_copy_their_anchor_and_a_bomb_is_refused() {
    let d = one("a: &s hello\nb: *s\nc: &l [1, 2]\nd:\n  - *l\n");
    assert_eq!(
        d.value,
        json!({"a": "hello", "b": "hello", "c": [1, 2], "d": [[1, 2]]})
    );
    assert_eq!(d.positions.line(&d.value, "b"), Some(2));
    assert_eq!(d.positions.line(&d.value, "d[0]"), Some(5));
    assert_eq!(d.positions.line(&d.value, "d[0][1]"), Some(3));
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..8 {
        let prev = format!("*a{}", i - 1);
        bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
    }
    let errors = errors_of(&bomb);
    assert!(
        errors[0].message.contains("excessive aliasing"),
        "{errors:?}"
    );
}

#[test]
fn keys_become_json_keys_as_sigs_yaml_makes_them() {
    let d = one("yes: a\n0x10: b\n1.5: c\n1e6: d\n\"yes\": e\n2001-12-14: f\n");
    assert_eq!(
        d.value,
        json!({"true": "a", "16": "b", "1.5": "c", "1e+06": "d", "yes": "e", "2001-12-14": "f"})
    );
    for (text, words) in [
        ("~: x\n", "null map key"),
        ("18446744073709551615: x\n", "beyond int64"),
        ("? {a: 1}\n: x\n", "must be a scalar"),
        ("a: .inf\n", "infinity"),
        ("a: !!int abc\n", "!!int"),
    ] {
        let errors = errors_of(text);
        assert_eq!(errors.len(), 1, "{text:?}: {errors:?}");
        assert!(errors[0].message.contains(words), "{text:?}: {errors:?}");
        assert_eq!(errors[0].line, 1, "{text:?}");
    }
}

#[test]
fn block_scalars_end_as_libyaml_ends_them() {
    assert_eq!(one("a: |\n  text").value, json!({"a": "text"}));
    assert_eq!(one("a: |\n  text\n").value, json!({"a": "text\n"}));
    assert_eq!(one("a: >-\n  0755\n").value, json!({"a": "0755"}));
}

#[test]
fn positions_find_fields_in_block_and_flow_style() {
    let text = "---\napiVersion: v1\nkind: X\nmetadata:\n  name: a\nspec:\n  name: inner\n  items:\n  - name: zero\n  - name: one\n    value: 1\n  policy:\n    numberOfClusters: 3\n  flow: {a: [1, {b: 2}]}\ndata:\n  a.b.yaml:\n    x: 1\n";
    let d = one(text);
    let line = |f: &str| d.positions.line(&d.value, f);
    assert_eq!(d.line, 2);
    assert_eq!(line(""), Some(2));
    assert_eq!(line("metadata.name"), Some(5));
    assert_eq!(line("spec.name"), Some(7));
    assert_eq!(line("spec.items[1].name"), Some(10));
    assert_eq!(line("spec.items[1].value"), Some(11));
    assert_eq!(line("spec.policy.numberOfClusters"), Some(13));
    assert_eq!(line("spec.flow.a[1].b"), Some(14));
    // The nearest enclosing field that exists.
    assert_eq!(line("spec.missing"), Some(6));
    assert_eq!(line("spec.items[7].name"), Some(8));
    assert_eq!(line("data.a.b.yaml.x"), Some(17));
    let item = d.positions.subtree(&d.value, "spec.items[1]");
    assert_eq!(item.line(&d.value["spec"]["items"][1], "value"), Some(11));
}

#[test]
fn hints_name_what_yaml_made_of_a_plain_scalar() {
    let d = one("a: yes\nb: 0755\nc: true\nd: \"yes\"\ne: ~\nf: 1.0\ng: [on]\n");
    let hint = |f: &str| d.positions.hint(&d.value, f);
    assert_eq!(
        hint("a").as_deref(),
        Some("YAML reads `yes` as the boolean true here; quote it (\"yes\") to keep the text")
    );
    assert_eq!(
        hint("b").as_deref(),
        Some("YAML reads `0755` as the number 493 here; quote it (\"0755\") to keep the text")
    );
    assert!(hint("c").unwrap().contains("`true` as the boolean true"));
    assert_eq!(hint("d"), None);
    assert!(hint("e").unwrap().contains("`~` as null"));
    assert!(hint("f").unwrap().contains("`1.0` as the number 1"));
    assert!(hint("g[0]").unwrap().contains("`on` as the boolean true"));
    assert_eq!(hint("missing"), None);
}

#[test]
fn typed_reading_turns_numbers_into_text_where_text_is_wanted() {
    #[derive(serde::Deserialize, Debug)]
    struct File {
        name: String,
        replicas: u32,
        enabled: bool,
    }
    let f: File = from_str("name: 0755\nreplicas: 010\nenabled: on\n").unwrap();
    assert_eq!((f.name.as_str(), f.replicas, f.enabled), ("493", 8, true));
    let e = from_str::<File>("name: x\nreplicas: many\nenabled: true\n").unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e.message.starts_with("replicas: invalid type"), "{e}");
    let e = from_str::<File>("a: 1\n---\nb: 2\n").unwrap_err();
    assert_eq!(e.line, Some(3));
    let e = from_str::<Value>("a: [1\n").unwrap_err();
    assert!(e.line.is_some(), "{e}");
}

#[test]
fn utf8_errors_name_their_line_and_column() {
    let e = text(b"a: 1\nb: \xff\n").unwrap_err();
    assert_eq!(e.line, Some(2));
    assert_eq!(
        e.to_string(),
        "line 2: not valid UTF-8 (byte 0xff at column 4)"
    );
    assert_eq!(text("\u{feff}a: 1".as_bytes()).unwrap(), "a: 1");
}

#[test]
fn json_files_get_positions_without_yaml_hints() {
    let text = "{\n  \"a\": 1,\n  \"b\": {\n    \"c\": \"yes\"\n  }\n}\n";
    let value: Value = serde_json::from_str(text).unwrap();
    let p = json_positions(text, &value);
    assert_eq!(p.line(&value, "b.c"), Some(4));
    assert_eq!(p.hint(&value, "a"), None);
    // A reading that does not fit gives no positions rather than wrong ones.
    assert_eq!(
        json_positions(text, &json!({"a": 1})).line(&value, "a"),
        None
    );
}

#[test]
fn written_yaml_reads_back_the_same_in_yaml_1_1() {
    let strings = [
        "yes",
        "Yes",
        "n",
        "N",
        "on",
        "Off",
        "y",
        "~",
        "null",
        "Null",
        "true",
        "0755",
        "0o17",
        "0x1F",
        "0b101",
        "1_000",
        "1:30",
        "190:20:30",
        "1e3",
        ".5",
        "+1",
        "-.inf",
        ".NaN",
        "<<",
        "=",
        "2001-12-14",
        "",
        " lead",
        "trail ",
        "#c",
        "a: b",
        "- x",
        "tab\tx",
        "multi\nline\n",
        "multi\nline",
        "x\n\n",
        "\u{feff}bom",
        "quote\"s",
        "back\\slash",
        "{a}",
        "[1]",
        "*x",
        "&x",
        "!tag",
        "%dir",
        "@at",
        "`tick",
        "|pipe",
        ">fold",
    ];
    let long = format!(
        "{} {}  double  spaces {}",
        "word ".repeat(30),
        "x".repeat(90),
        "end"
    );
    let mut value = json!({
        "strings": strings.to_vec(),
        "long": long,
        "numbers": [1, -2, 1.5, 1e21, 0.000001],
        "flags": [true, false, null],
        "empty": {"map": {}, "list": []},
        "nested": [{"k": "v", "l": [1, 2]}, [3, 4]],
    });
    for s in strings {
        value[s] = json!(s);
    }
    let text = to_string(&value).unwrap();
    assert_eq!(documents(&text).unwrap(), vec![value], "{text}");
}

#[test]
fn a_quoted_key_is_found_whole() {
    let d =
        one("metadata:\n  labels:\n    a: b\n    app.kubernetes.io/name: x\n    \"bad key!\": y\n");
    let line = |f: &str| d.positions.line(&d.value, f);
    assert_eq!(
        line(r#"metadata.labels["app.kubernetes.io/name"]"#),
        Some(4)
    );
    assert_eq!(line(r#"metadata.labels["bad key!"]"#), Some(5));
    assert_eq!(line("metadata.labels.app.kubernetes.io/name"), Some(4));
    // A key that is not there: the line of the map.
    assert_eq!(line(r#"metadata.labels["none"]"#), Some(2));
}
