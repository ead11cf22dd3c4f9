//! Placeholder reader (conversation-format JSONL only) until the streaming input layer lands.

use std::io::BufRead;
use std::path::PathBuf;

use crate::render::Conversation;

pub struct Row {
    pub file: usize,
    pub number: u64,
    pub id: Option<String>,
    pub conversation: Conversation,
}

pub enum Item {
    /// Boxed: a conversation is large next to a skip, and most items are rows anyway.
    Row(Box<Row>),
    Skipped {
        source: String,
        reason: &'static str,
        error: Option<String>,
    },
}

#[derive(Debug, Clone, Default)]
pub struct InputSummary {
    pub files: Vec<(String, &'static str, u64)>,
}

pub struct Rows {
    lines: Vec<(String, String)>,
    at: usize,
}

impl Iterator for Rows {
    type Item = Item;
    fn next(&mut self) -> Option<Item> {
        let (source, text) = self.lines.get(self.at)?.clone();
        self.at += 1;
        Some(match Conversation::from_json_text(&text, &source) {
            Ok(c) => Item::Row(Box::new(Row {
                file: 0,
                number: self.at as u64,
                id: None,
                conversation: c,
            })),
            Err(e) => Item::Skipped {
                source,
                reason: "not_json",
                error: Some(e.to_string()),
            },
        })
    }
}

impl Rows {
    pub fn summary(&self) -> InputSummary {
        InputSummary::default()
    }
}

pub fn open_rows(paths: &[PathBuf]) -> anyhow::Result<Rows> {
    let mut lines = Vec::new();
    for p in paths {
        let f = std::io::BufReader::new(std::fs::File::open(p)?);
        for (i, l) in f.lines().enumerate() {
            lines.push((format!("{}:{}", p.display(), i + 1), l?));
        }
    }
    Ok(Rows { lines, at: 0 })
}
