//! Changes to a template's source, applied in one pass, and the way from the changed text
//! back to the source a user wrote.

/// How the wraps nest where they open at one offset (lower is outer), as the operators
/// bind: a namespace assignment holds anything, a comparison holds sums, a sum holds `~`
/// chains, a `~` operand holds products.
pub(super) const SETATTR_LEVEL: i32 = 0;
pub(super) const IN_LEVEL: i32 = 1;
pub(super) const ADD_LEVEL: i32 = 200_000;
pub(super) const STR_LEVEL: i32 = 300_000;
pub(super) const MUL_LEVEL: i32 = 500_000;

/// A change to the source: `text` replaces `start..end` (an insertion when they are equal).
/// Edits at one offset apply closing text before opening text, an outer opening before an
/// inner one and an inner closing before an outer one, then replacements.
struct Edit {
    start: usize,
    end: usize,
    order: (u8, i32),
    text: String,
}

#[derive(Default)]
pub(super) struct Edits(Vec<Edit>);

impl Edits {
    /// Wraps `start..end` in `open` and `close`; `level` 0 is outermost.
    pub(super) fn wrap(&mut self, start: usize, end: usize, level: i32, open: String, close: &str) {
        self.0.push(Edit {
            start,
            end: start,
            order: (1, level),
            text: open,
        });
        self.0.push(Edit {
            start: end,
            end,
            order: (0, -level),
            text: close.to_string(),
        });
    }

    pub(super) fn replace(&mut self, start: usize, end: usize, text: String) {
        self.0.push(Edit {
            start,
            end,
            order: (2, 0),
            text,
        });
    }

    pub(super) fn apply(mut self, source: &str) -> Instrumented {
        self.0.sort_by_key(|e| (e.start, e.order));
        let extra: usize = self.0.iter().map(|e| e.text.len()).sum();
        let mut text = String::with_capacity(source.len() + extra);
        let mut kept = Vec::with_capacity(self.0.len() + 1);
        let mut at = 0;
        for edit in &self.0 {
            if edit.start < at {
                continue;
            }
            kept.push((text.len(), at, edit.start - at));
            text.push_str(&source[at..edit.start]);
            text.push_str(&edit.text);
            at = edit.end;
        }
        kept.push((text.len(), at, source.len() - at));
        text.push_str(&source[at..]);
        Instrumented { text, kept }
    }
}

/// The instrumented source, and where its text came from: for each run copied from the
/// source, (offset in `text`, offset in the source, length). Errors point into `text`; a user
/// is shown the source they wrote.
pub struct Instrumented {
    pub text: String,
    kept: Vec<(usize, usize, usize)>,
}

impl Instrumented {
    /// The source offset of `text` offset `at` (text kvaudit inserted maps to where it went).
    pub fn source_offset(&self, at: usize) -> usize {
        let i = self.kept.partition_point(|&(from, _, _)| from <= at);
        match i.checked_sub(1).map(|i| self.kept[i]) {
            Some((from, source, len)) => source + (at - from).min(len),
            None => 0,
        }
    }
}
