//! Printing a long text as it is produced, without its trailing whitespace and with one final
//! line break: what `println!("{}", text.trim_end())` prints, without holding `text` whole
//! (a plan's diffs can be many times the size of the manifests they show).

use std::fmt;
use std::io;

/// A [`fmt::Write`] onto an [`io::Write`] that holds back whitespace until something follows
/// it, so that [`TrimmedOutput::finish`] can drop the text's trailing whitespace as
/// [`str::trim_end`] would. The first I/O error is kept for `finish` (`fmt::Error` carries none).
pub struct TrimmedOutput<W: io::Write> {
    inner: W,
    held: String,
    error: Option<io::Error>,
}

impl<W: io::Write> TrimmedOutput<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            held: String::new(),
            error: None,
        }
    }

    /// Ends the text with one line break and flushes; the first I/O error if there was one.
    pub fn finish(mut self) -> io::Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.inner.write_all(b"\n")?;
        self.inner.flush()?;
        Ok(self.inner)
    }

    fn emit(&mut self, s: &str) -> fmt::Result {
        if self.error.is_some() {
            return Err(fmt::Error);
        }
        let held = std::mem::take(&mut self.held);
        let result = self
            .inner
            .write_all(held.as_bytes())
            .and_then(|()| self.inner.write_all(s.as_bytes()));
        // Keep the buffer's allocation for the next run of whitespace.
        self.held = held;
        self.held.clear();
        result.map_err(|e| {
            self.error = Some(e);
            fmt::Error
        })
    }
}

impl<W: io::Write> fmt::Write for TrimmedOutput<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Each `&str` holds whole characters, so trimming it alone finds where its trailing
        // whitespace starts.
        let kept = s.trim_end();
        if kept.is_empty() {
            self.held.push_str(s);
            return Ok(());
        }
        self.emit(kept)?;
        self.held.push_str(&s[kept.len()..]);
        Ok(())
    }
}

/// An [`io::Write`] for serialisers that write bytes (JSON), sent through a [`TrimmedOutput`]:
/// valid UTF-8 is passed on as it arrives, a character split between two writes once whole.
pub struct Utf8Bytes<'a, W: io::Write> {
    out: &'a mut TrimmedOutput<W>,
    partial: Vec<u8>,
}

impl<'a, W: io::Write> Utf8Bytes<'a, W> {
    pub fn new(out: &'a mut TrimmedOutput<W>) -> Self {
        Self {
            out,
            partial: Vec::new(),
        }
    }
}

impl<W: io::Write> io::Write for Utf8Bytes<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        use fmt::Write as _;
        self.partial.extend_from_slice(buf);
        let valid = match std::str::from_utf8(&self.partial) {
            Ok(s) => s.len(),
            // An incomplete character at the end waits for the next write.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => return Err(io::Error::new(io::ErrorKind::InvalidData, "not UTF-8")),
        };
        let text = std::str::from_utf8(&self.partial[..valid]).expect("checked above");
        if self.out.write_str(text).is_err() {
            return Err(self
                .out
                .error
                .take()
                .unwrap_or_else(|| io::Error::other("formatting failed")));
        }
        self.partial.drain(..valid);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    fn through(pieces: &[&str]) -> String {
        let mut out = TrimmedOutput::new(Vec::new());
        for p in pieces {
            out.write_str(p).unwrap();
        }
        String::from_utf8(out.finish().unwrap()).unwrap()
    }

    #[test]
    fn prints_what_println_of_the_trimmed_text_prints() {
        let cases: &[&[&str]] = &[
            &["a\n", "b\n\n", "  \n"],
            &["a", " ", "\n", "b", "\t\n"],
            &["", "x\u{a0}", "\u{2003}"],
            &["  lead", " \n \n", "mid  ", "\n"],
            &["\n\n"],
            &[],
        ];
        for pieces in cases {
            let whole: String = pieces.concat();
            assert_eq!(
                through(pieces),
                format!("{}\n", whole.trim_end()),
                "{pieces:?}"
            );
        }
    }

    #[test]
    fn bytes_split_inside_a_character_arrive_whole() {
        use std::io::Write as _;
        let text = "{\n  \"k\": \"é→ü\"\n}  \n";
        let mut out = TrimmedOutput::new(Vec::new());
        {
            let mut bytes = Utf8Bytes::new(&mut out);
            for b in text.as_bytes() {
                bytes.write_all(&[*b]).unwrap();
            }
        }
        let printed = String::from_utf8(out.finish().unwrap()).unwrap();
        assert_eq!(printed, format!("{}\n", text.trim_end()));
    }

    #[test]
    fn an_io_error_is_kept_for_finish() {
        struct Broken;
        impl io::Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = TrimmedOutput::new(Broken);
        assert!(out.write_str("text").is_err());
        assert!(out.write_str("more").is_err());
        let err = out.finish().err().expect("the error is reported");
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
