//! The render human view. Each prompt (or held stream) gets a header line in head(1)'s
//! `==> … <==` style, then its text verbatim: nothing escaped, so it can be copied as is. A
//! text that does not end with a newline gets one for the layout, and diff's `\ No newline`
//! line says so. With tokens, the text is `text·id` pairs instead, control characters spelled
//! out and special tokens in ⟨ ⟩ (bold on a terminal).

use std::fmt::Write;

use owo_colors::{OwoColorize, Stream};

use crate::audit::{RenderedConversations, RenderedToken};
use crate::report::layout::plural;
use crate::report::{Exporter, Style, visible};

pub struct Human;

impl Exporter<RenderedConversations> for Human {
    fn export(&self, report: &RenderedConversations, _style: &Style) -> anyhow::Result<String> {
        Ok(to_human(report))
    }
}

fn header(out: &mut String, text: &str) {
    let line = format!("==> {text} <==");
    let _ = writeln!(
        out,
        "{}",
        line.if_supports_color(Stream::Stdout, |t| t.bold())
    );
}

fn verbatim(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push_str("\n\\ No newline at end of text\n");
    }
}

/// `text·id` pairs separated by spaces, a new line after each token that ends a line.
fn token_lines(out: &mut String, tokens: &[RenderedToken]) {
    let mut at_start = true;
    for t in tokens {
        if !at_start {
            out.push(' ');
        }
        let text = visible(&t.text);
        if t.special {
            let marked = format!("⟨{text}⟩");
            let _ = write!(
                out,
                "{}",
                marked.if_supports_color(Stream::Stdout, |s| s.bold())
            );
        } else {
            out.push_str(&text);
        }
        let _ = write!(out, "·{}", t.id);
        at_start = t.text.ends_with('\n');
        if at_start {
            out.push('\n');
        }
    }
    if !at_start {
        out.push('\n');
    }
}

fn to_human(report: &RenderedConversations) -> String {
    let mut out = String::new();
    let many = report.conversations.len() > 1;
    for c in &report.conversations {
        let name = if many {
            format!("{}, ", c.source)
        } else {
            String::new()
        };
        for p in &c.prompts {
            header(
                &mut out,
                &format!(
                    "{name}prompt {} ({}, template {})",
                    p.number,
                    plural(p.ids.len(), "token"),
                    c.template_origin
                ),
            );
            match &p.tokens {
                Some(tokens) => token_lines(&mut out, tokens),
                None => verbatim(&mut out, &p.text),
            }
        }
        for h in &c.held {
            let generated = h.ids.len() - h.prompt_tokens;
            let (how, from) = if h.sampled_ids {
                (" (generated_ids)", "the conversation's generated_ids")
            } else {
                ("", "its text encoded")
            };
            header(
                &mut out,
                &format!(
                    "{name}held {} -> {}: prompt {} + reply ({}: {} prompt + {generated} reply{how}, template {})",
                    h.from_prompt,
                    h.from_prompt + 1,
                    h.from_prompt,
                    plural(h.ids.len(), "token"),
                    h.prompt_tokens,
                    c.template_origin
                ),
            );
            match &h.tokens {
                Some(tokens) => {
                    let (prompt, reply) = tokens.split_at(h.prompt_tokens.min(tokens.len()));
                    token_lines(&mut out, prompt);
                    let _ = writeln!(out, "-- reply: {from} --");
                    token_lines(&mut out, reply);
                }
                None => verbatim(&mut out, &format!("{}{}", h.prompt_text, h.generated_text)),
            }
        }
    }
    out
}
