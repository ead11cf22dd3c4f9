//! The conversations seen, each known by its latest request: a request whose messages are an
//! earlier request's messages, a reply and what follows is that conversation's next turn.
//! Bounded: the least recently seen conversation is forgotten first (and, when recording,
//! written out then).

use serde::Serialize;
use serde_json::{Map, Value as Json};

use super::lru::Lru;
use crate::render::Conversation;

/// How a request was linked to the conversation before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    /// No reply in its messages: a conversation's first request.
    First,
    /// The request before it was seen.
    Linked,
    /// It carries replies, but the request they answered was never seen (or forgotten).
    Unseen,
}

impl Link {
    pub fn as_str(self) -> &'static str {
        match self {
            Link::First => "first",
            Link::Linked => "linked",
            Link::Unseen => "unseen",
        }
    }
}

pub struct Conversations {
    /// Each conversation by its latest request's key, with its corpus row when recording.
    seen: Lru<Option<Json>>,
    record: bool,
    /// Rows of forgotten conversations, for the record, until taken.
    forgotten: Vec<Json>,
}

impl Conversations {
    pub fn new(capacity: usize, record: bool) -> Conversations {
        Conversations {
            seen: Lru::new(capacity),
            record,
            forgotten: Vec::new(),
        }
    }

    /// Notes a request's conversation; returns how it links to the request before it.
    pub fn observe(&mut self, conv: &Conversation) -> Link {
        let link = match crate::render::last_reply(&conv.messages) {
            None => Link::First,
            Some(at) => match self.seen.remove(key(&conv.messages[..at])) {
                Some(_) => Link::Linked,
                None => Link::Unseen,
            },
        };
        // The same messages again (a retry) replace their entry: one conversation, not two.
        let row = self.record.then(|| row(conv));
        let forgotten = &mut self.forgotten;
        self.seen.insert(key(&conv.messages), row, |row| {
            forgotten.extend(row);
        });
        link
    }

    /// Rows of the conversations forgotten since the last call.
    pub fn take_forgotten(&mut self) -> Vec<Json> {
        std::mem::take(&mut self.forgotten)
    }

    /// Every remembered conversation's row, least recently seen first (the run ends).
    pub fn drain_rows(&mut self) -> Vec<Json> {
        let mut rows = self.take_forgotten();
        rows.extend(self.seen.drain().into_iter().flatten());
        rows
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// The key a request is known by: its messages as sent.
pub(crate) fn key(messages: &[Json]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for m in messages {
        // serde_json writes a value the same way each time (keys in their given order).
        h.update(m.to_string().as_bytes());
        h.update(&[0]);
    }
    h.digest()
}

/// A conversation as `kvaudit corpus` reads it.
fn row(conv: &Conversation) -> Json {
    let mut row = Map::new();
    row.insert("messages".into(), Json::Array(conv.messages.clone()));
    if let Some(t) = &conv.tools {
        row.insert("tools".into(), t.clone());
    }
    if !conv.template_kwargs.is_empty() {
        row.insert(
            "template_kwargs".into(),
            Json::Object(conv.template_kwargs.clone()),
        );
    }
    Json::Object(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::ResendMode;
    use serde_json::json;

    fn conv(messages: Json) -> Conversation {
        let Json::Array(m) = messages else {
            unreachable!()
        };
        Conversation::of_messages("t", m, ResendMode::Content)
    }

    #[test]
    fn a_turn_links_to_the_request_it_extends_and_the_oldest_is_forgotten() {
        let mut c = Conversations::new(2, true);
        let a1 = json!([{"role": "user", "content": "a"}]);
        let a2 = json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "b"}]);
        let b1 = json!([{"role": "user", "content": "b"}]);
        let c1 = json!([{"role": "user", "content": "c"}]);
        assert_eq!(c.observe(&conv(a1.clone())), Link::First);
        assert_eq!(c.observe(&conv(b1.clone())), Link::First);
        assert_eq!(c.observe(&conv(a2.clone())), Link::Linked);
        assert_eq!(c.len(), 2);
        // A third conversation forgets b (seen least recently), not a.
        assert_eq!(c.observe(&conv(c1.clone())), Link::First);
        assert_eq!(c.take_forgotten(), vec![json!({ "messages": b1 })]);
        let unseen = json!([{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}, {"role": "user", "content": "s"}]);
        assert_eq!(c.observe(&conv(unseen)), Link::Unseen);
        let rows = c.drain_rows();
        // a2 forgotten by the last, then c1 and the last, least recently seen first.
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], json!({ "messages": a2 }));
        assert_eq!(rows[1], json!({ "messages": c1 }));
        assert!(c.is_empty());
    }
}
