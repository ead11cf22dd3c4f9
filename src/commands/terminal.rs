//! What reaches the user's terminal: text from templates, configs, captures and servers is
//! untrusted, and a terminal obeys the control sequences in it (an OSC can retitle the window,
//! write the clipboard or hide a link; a carriage return can overwrite a warning). Every line on
//! stderr and everything on stdout goes through here: control characters are written as
//! escapes, secrets as `[redacted]`, and error lines are cut to a length a person reads.

use std::io::Write;
use std::sync::OnceLock;

/// The longest line written to stderr: a raised message of 10 MB or a list of 100,000 names is
/// cut, keeping the start (what failed) and the end (the innermost cause).
pub const MAX_LINE: usize = 1000;
const KEEP_HEAD: usize = 700;
const KEEP_TAIL: usize = 200;

static SECRETS: OnceLock<Vec<String>> = OnceLock::new();

/// Values never to print (API keys, tokens, header values). Shorter ones are ignored: a
/// one-letter "secret" would blank every line it occurs in.
pub fn set_secrets(values: impl IntoIterator<Item = String>) {
    let mut v: Vec<String> = values
        .into_iter()
        .filter(|s| s.chars().count() >= MIN_SECRET)
        .collect();
    // Longest first, so that a secret containing another is replaced whole.
    v.sort_by_key(|s| std::cmp::Reverse(s.len()));
    v.dedup();
    let _ = SECRETS.set(v);
}

const MIN_SECRET: usize = 6;

fn secrets() -> &'static [String] {
    SECRETS.get().map_or(&[], Vec::as_slice)
}

fn redact<'t>(text: &'t str, secrets: &[String]) -> std::borrow::Cow<'t, str> {
    let mut out = std::borrow::Cow::Borrowed(text);
    for s in secrets {
        if out.contains(s.as_str()) {
            out = std::borrow::Cow::Owned(out.replace(s.as_str(), "[redacted]"));
        }
    }
    out
}

/// Characters a terminal acts on rather than shows: C0 controls, DEL, C1 controls, and the
/// bidirectional overrides and isolates that reorder what is shown ("Trojan Source").
fn is_unsafe(c: char) -> bool {
    matches!(c, '\0'..='\x1f' | '\x7f'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `\u001b`: valid inside a JSON string (the same character to a JSON reader) and plain to
/// a person.
fn push_escape(out: &mut String, c: char) {
    use std::fmt::Write as _;
    let _ = write!(out, "\\u{:04x}", c as u32);
}

/// One line for stderr: secrets redacted, line breaks as spaces (a cause chain may carry
/// them), every other control character escaped, and at most [`MAX_LINE`] characters.
pub fn line(text: &str) -> String {
    let text = redact(text, secrets());
    let mut out = String::with_capacity(text.len().min(MAX_LINE + 64));
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if is_unsafe(c) => push_escape(&mut out, c),
            c => out.push(c),
        }
    }
    cut(out)
}

fn cut(text: String) -> String {
    let total = text.chars().count();
    if total <= MAX_LINE {
        return text;
    }
    let head: String = text.chars().take(KEEP_HEAD).collect();
    let tail: String = text.chars().skip(total - KEEP_TAIL).collect();
    format!(
        "{head} … [{} characters left out] … {tail}",
        total - KEEP_HEAD - KEEP_TAIL
    )
}

/// Write `text` as one line on stderr. A closed or full stderr loses the line and nothing
/// else: `eprintln!` would panic there.
pub fn stderr_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", line(text));
}

/// Stdout as the terminal should get it: line breaks and tabs pass, the SGR colour sequences
/// kvaudit writes itself pass when colour is on, every other control character is escaped and
/// every secret redacted. JSON output passes unchanged (its encoder escapes controls itself;
/// a C1 or bidi character inside a string becomes a `\u` escape, which reads back the same).
pub struct Safe<W: Write> {
    inner: W,
    colour: bool,
}

impl<W: Write> Safe<W> {
    pub fn new(inner: W, colour: bool) -> Self {
        Safe { inner, colour }
    }

    /// `text` as it may be shown.
    fn clean(&self, text: &str) -> String {
        let text = redact(text, secrets());
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_ref();
        while let Some(c) = rest.chars().next() {
            if c == '\x1b'
                && self.colour
                && let Some(n) = sgr_len(rest)
            {
                out.push_str(&rest[..n]);
                rest = &rest[n..];
                continue;
            }
            match c {
                '\n' | '\t' => out.push(c),
                c if is_unsafe(c) => push_escape(&mut out, c),
                c => out.push(c),
            }
            rest = &rest[c.len_utf8()..];
        }
        out
    }
}

/// Length of the SGR sequence (`ESC [ digits and semicolons m`) at the start of `s`.
fn sgr_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("\x1b[")?;
    let n = body
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (body.as_bytes().get(n) == Some(&b'm')).then_some(2 + n + 1)
}

impl<W: Write> Write for Safe<W> {
    /// Takes the whole buffer or fails, so a UTF-8 sequence or an escape is never split
    /// between two calls (every command writes its report with `write_all`).
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = match std::str::from_utf8(buf) {
            Ok(text) if !text.bytes().any(needs_look) && secrets().is_empty() => {
                self.inner.write_all(buf)
            }
            Ok(text) => self.inner.write_all(self.clean(text).as_bytes()),
            // Not text: kvaudit writes none to stdout, but whatever it is, no raw control
            // byte goes through.
            Err(_) => {
                let text = String::from_utf8_lossy(buf);
                self.inner.write_all(self.clean(&text).as_bytes())
            }
        };
        written.map_err(output_error)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().map_err(output_error)
    }
}

/// The error says which file failed (the kind is kept: a closed pipe is still one).
fn output_error(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot write the output: {e}"))
}

/// Bytes that may start an unsafe character: C0 (but line breaks and tabs), DEL, and the lead
/// bytes of C1 (0xC2) and of the bidi controls (0xE2).
fn needs_look(b: u8) -> bool {
    (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f || b == 0xc2 || b == 0xe2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str, colour: bool) -> String {
        let mut out = Vec::new();
        Safe::new(&mut out, colour)
            .write_all(text.as_bytes())
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn control_sequences_are_shown_not_obeyed() {
        let hostile = "a\x1b]0;owned\x07b\rc\0d\u{9b}2Je\u{202e}fg";
        assert_eq!(
            shown(hostile, false),
            "a\\u001b]0;owned\\u0007b\\u000dc\\u0000d\\u009b2Je\\u202efg"
        );
        // Colour on: kvaudit's own SGR sequences pass, an OSC does not.
        assert_eq!(
            shown("\x1b[1;31mred\x1b[0m \x1b]8;;x\x1b\\", true),
            "\x1b[1;31mred\x1b[0m \\u001b]8;;x\\u001b\\"
        );
        assert_eq!(shown("\x1b[1;31mred", false), "\\u001b[1;31mred");
        // Plain text, line breaks, tabs and other non-ASCII text pass as they are.
        let plain = "turn 1 -> 2\n\t→ «ok» 日本 ✓ é\n";
        assert_eq!(shown(plain, false), plain);
    }

    #[test]
    fn json_with_hostile_strings_reads_back_the_same() {
        let value = serde_json::json!({"topic": "kv\u{1b}]0;x\u{7}\u{9b}\u{202e}@p@m"});
        let text = serde_json::to_string_pretty(&value).unwrap();
        let back: serde_json::Value = serde_json::from_str(&shown(&text, false)).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn error_lines_are_one_bounded_line() {
        assert_eq!(line("a\nb\x1b[2Jc"), "a b\\u001b[2Jc");
        let long = format!("start {} end", "x".repeat(10 << 20));
        let l = line(&long);
        assert!(l.chars().count() < MAX_LINE + 60, "{}", l.len());
        assert!(l.starts_with("start xxx") && l.ends_with("xxx end"));
        assert!(l.contains(&format!(
            "[{} characters left out]",
            long.chars().count() - KEEP_HEAD - KEEP_TAIL
        )));
        assert_eq!(line(&"é".repeat(MAX_LINE)), "é".repeat(MAX_LINE));
    }

    #[test]
    fn secrets_are_redacted_longest_first() {
        let secrets = vec!["sk-live-abcdef123".to_string(), "sk-live".to_string()];
        assert_eq!(
            redact("Bearer sk-live-abcdef123 and sk-live", &secrets),
            "Bearer [redacted] and [redacted]"
        );
    }
}
