//! Replays the fuzz targets' committed corpora (fuzz/corpus/<target>/) through the same entry
//! points the fuzzers call (`gitfleet_testkit::fuzzing`), on stable: every input the fuzzers kept, and
//! every crash they once found (kept there after the fix), must pass.

use std::path::Path;

#[test]
fn every_corpus_input_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut total = 0;
    for (name, target) in gitfleet_testkit::fuzzing::TARGETS {
        let dir = root.join(name);
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "{}: no corpus", dir.display());
        for input in &inputs {
            let data = std::fs::read(input).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{} fails on {}", name, input.display());
        }
        println!("{name}: {} inputs replayed", inputs.len());
        total += inputs.len();
    }
    println!("{total} corpus inputs replayed");
}
