//! Fitting human output to the terminal: display widths, cut rows, wrapped prose, tables.

use unicode_width::UnicodeWidthStr;

/// Columns a string takes on a terminal (CJK and emoji take two).
/// `1 transition`, `2 transitions`.
pub fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

pub fn width(text: &str) -> usize {
    UnicodeWidthStr::width(text)
}

/// `line` cut to `max` columns, ending in `…` when cut.
pub fn fit(line: &str, max: usize) -> String {
    if width(line) <= max {
        return line.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in line.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// Prose wrapped at word boundaries to `max` columns: the first line starts with `first`,
/// the others with `rest` (a hanging indent). Ends with a newline.
pub fn wrap(text: &str, max: usize, first: &str, rest: &str) -> String {
    // Break at spaces only: model ids, paths and reason names keep their hyphens.
    let options = textwrap::Options::new(max.max(width(rest) + 10))
        .initial_indent(first)
        .subsequent_indent(rest)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out = textwrap::fill(text, options);
    out.push('\n');
    out
}

/// Every line wider than `max` wrapped at spaces, continuing under its own indent plus four:
/// for reports made of one-line facts whose values (paths, reasons, errors) vary in length.
pub fn wrap_long_lines(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if width(line) <= max {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        out.push_str(&wrap(body, max, indent, &format!("{indent}    ")));
    }
    out
}

/// A column of a [`Table`].
pub struct Column {
    pub header: String,
    pub right: bool,
    /// Dropped, least important first, while the table is wider than the screen.
    pub drop_rank: Option<u8>,
}

impl Column {
    pub fn left(header: &str) -> Column {
        Column {
            header: header.into(),
            right: false,
            drop_rank: None,
        }
    }
    pub fn right(header: &str) -> Column {
        Column {
            header: header.into(),
            right: true,
            drop_rank: None,
        }
    }
    pub fn droppable(mut self, rank: u8) -> Column {
        self.drop_rank = Some(rank);
        self
    }
}

/// A plain-text table sized to its content; columns marked droppable go (lowest rank first)
/// until it fits `max` columns, and a cell that still does not fit is cut.
pub struct Table {
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<String>>,
    pub indent: usize,
}

impl Table {
    pub fn render(&self, max: usize) -> String {
        let n = self.columns.len();
        let col_width = |i: usize| {
            self.rows
                .iter()
                .map(|r| r.get(i).map_or(0, |c| width(c)))
                .chain([width(&self.columns[i].header)])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..n).map(col_width).collect();
        let mut keep: Vec<bool> = vec![true; n];
        let total = |keep: &[bool]| {
            self.indent
                + (0..n)
                    .filter(|&i| keep[i])
                    .map(|i| widths[i] + 2)
                    .sum::<usize>()
                    .saturating_sub(2)
        };
        let mut order: Vec<usize> = (0..n)
            .filter(|&i| self.columns[i].drop_rank.is_some())
            .collect();
        order.sort_by_key(|&i| self.columns[i].drop_rank);
        for i in order {
            if total(&keep) <= max {
                break;
            }
            keep[i] = false;
        }
        let line = |cells: Vec<&str>| {
            let mut s = " ".repeat(self.indent);
            let mut first = true;
            for (i, cell) in cells.into_iter().enumerate() {
                if !keep[i] {
                    continue;
                }
                if !first {
                    s.push_str("  ");
                }
                first = false;
                let pad = widths[i].saturating_sub(width(cell));
                if self.columns[i].right {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                } else {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                }
            }
            let mut s = fit(s.trim_end(), max);
            s.push('\n');
            s
        };
        let mut out = line(self.columns.iter().map(|c| c.header.as_str()).collect());
        for r in &self.rows {
            out.push_str(&line(r.iter().map(String::as_str).collect()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_counts_display_width() {
        assert_eq!(fit("abcdef", 6), "abcdef");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("日本語テキスト", 7), "日本語…");
        assert!(width(&fit("日本語テキスト", 7)) <= 7);
    }

    #[test]
    fn wrap_hangs_and_keeps_within_width() {
        let text =
            "router: pod reuses 158 tokens, llm-d index (block 64) sees 128; decider: decode-only";
        let out = wrap(text, 30, "    ", "      ");
        assert!(out.lines().all(|l| width(l) <= 30), "{out}");
        assert!(
            out.lines().skip(1).all(|l| l.starts_with("      ")),
            "{out}"
        );
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
    }

    #[test]
    fn long_lines_wrap_under_their_indent() {
        let text = "short\n  a long line of words that goes on past the width\n";
        assert_eq!(
            wrap_long_lines(text, 24),
            "short\n  a long line of words\n      that goes on past\n      the width\n"
        );
    }

    #[test]
    fn tables_drop_low_rank_columns_to_fit() {
        let t = Table {
            columns: vec![
                Column::right("block"),
                Column::left("profile").droppable(1),
                Column::right("tokens"),
            ],
            rows: vec![vec!["64".into(), "router-2026-08".into(), "1234".into()]],
            indent: 0,
        };
        let wide = t.render(80);
        assert!(wide.contains("router-2026-08"), "{wide}");
        let narrow = t.render(16);
        assert!(!narrow.contains("profile"), "{narrow}");
        assert!(narrow.lines().all(|l| width(l) <= 16), "{narrow}");
        assert_eq!(narrow, "block  tokens\n   64    1234\n");
    }
}
