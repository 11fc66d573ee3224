//! Aligned text tables for people: columns padded to their widest cell, two spaces apart, no
//! trailing blanks. Every command's table output goes through here.

/// One line per row; the first row is usually the header.
pub fn render<R: AsRef<[String]>>(rows: &[R]) -> String {
    let columns = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.as_ref().get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .as_ref()
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn pads_columns_and_trims_line_ends() {
        let rows = vec![
            vec!["NAME".to_string(), "STATE".to_string()],
            vec!["a-long-name".to_string(), "ok".to_string()],
            vec!["b".to_string(), String::new()],
        ];
        assert_eq!(
            super::render(&rows),
            "NAME         STATE\na-long-name  ok\nb\n"
        );
    }
}
