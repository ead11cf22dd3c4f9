//! The PPD paper's session key: its proxy routes turn 2+ of a chat to the decode pod that
//! served turn 1, keyed by the MD5 of the first user message. Conversations that open with
//! the same message (greetings, templated agent flows, benchmark questions answered by many
//! models) share a key, so while they overlap in time the proxy sends their turns to one pod,
//! which holds only one of their histories.

use std::collections::HashMap;

use md5::{Digest, Md5};
use serde_json::Value as Json;

use crate::render::field;

/// The text hashed: the first user message's content as the proxy reads it — a string as it
/// is, other content (parts lists) as compact JSON.
pub fn first_user_text(messages: &[Json]) -> Option<String> {
    let m = messages
        .iter()
        .find(|m| field(m, "role").and_then(Json::as_str) == Some("user"))?;
    Some(match field(m, "content") {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Null) | None => String::new(),
        Some(other) => other.to_string(),
    })
}

pub fn key(text: &str) -> [u8; 16] {
    Md5::digest(text.as_bytes()).into()
}

/// How many characters of a shared opening message the report quotes.
const EXCERPT_CHARS: usize = 60;

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Group {
    conversations: u64,
    /// Turn-2+ requests (transitions) of its conversations, and the most any one has.
    requests: u64,
    most_requests: u64,
    /// The first conversation (in input order) and its opening message, shortened.
    first: u64,
    excerpt: String,
}

/// Session keys of every audited conversation. Grows with the number of distinct opening
/// messages (about 100 bytes each), the one table in a corpus run that does.
#[derive(Debug, Clone, Default)]
pub struct SessionKeys {
    groups: HashMap<[u8; 16], Group>,
}

/// In a file (a corpus partial) each key is an array beside its group, `[key in hex,
/// conversations, requests, most_requests, first, excerpt]`, keys in order, so the same keys
/// are always written the same way, and millions of them stay compact.
type WrittenKey = (String, u64, u64, u64, u64, String);

impl serde::Serialize for SessionKeys {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut keys: Vec<(&[u8; 16], &Group)> = self.groups.iter().collect();
        keys.sort_unstable_by_key(|(k, _)| **k);
        s.collect_seq(keys.into_iter().map(|(k, g)| {
            (
                hex(k),
                g.conversations,
                g.requests,
                g.most_requests,
                g.first,
                g.excerpt.as_str(),
            )
        }))
    }
}

impl<'de> serde::Deserialize<'de> for SessionKeys {
    /// Each key checked and inserted as it is read: no list of them is built first.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = SessionKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of session keys")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<SessionKeys, A::Error> {
                use serde::de::Error;
                let mut out = SessionKeys::default();
                while let Some(w) = seq.next_element::<WrittenKey>()? {
                    let (key, conversations, requests, most_requests, first, excerpt) = w;
                    let k = unhex(&key)
                        .ok_or_else(|| A::Error::custom(format!("{key:?} is not an MD5 in hex")))?;
                    if most_requests > requests {
                        return Err(A::Error::custom(format!(
                            "session key {key}: more requests for one conversation than in all"
                        )));
                    }
                    if excerpt.chars().count() > EXCERPT_CHARS + 1 {
                        return Err(A::Error::custom(format!(
                            "session key {key}: an excerpt longer than kvaudit writes"
                        )));
                    }
                    let group = Group {
                        conversations,
                        requests,
                        most_requests,
                        first,
                        excerpt,
                    };
                    if conversations == 0 || out.groups.insert(k, group).is_some() {
                        return Err(A::Error::custom(format!(
                            "session key {key} listed twice or with no conversation"
                        )));
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Keys)
    }
}

fn hex(k: &[u8; 16]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 16]> {
    let bytes = s.as_bytes();
    if bytes.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *o = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// One key shared by several conversations.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedKey {
    pub key: String,
    pub conversations: u64,
    pub requests: u64,
    pub excerpt: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collisions {
    pub distinct_keys: u64,
    pub shared_keys: u64,
    /// Conversations whose key another conversation has too.
    pub conversations_sharing: u64,
    /// Turn-2+ requests of those conversations.
    pub requests_sharing: u64,
    /// If the conversations of a key overlap in time, all their turn-2+ requests go to one
    /// pod, which holds one conversation's history at best: every request of the others (all
    /// but the conversation with the most requests) lands on another conversation's pod.
    pub requests_misrouted: u64,
    /// The most shared keys, most conversations first.
    pub largest: Vec<SharedKey>,
}

impl SessionKeys {
    /// Distinct keys held.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// `order` is the conversation's place in the input, so the quoted message is the same
    /// whichever worker saw it first.
    pub fn add(&mut self, text: &str, order: u64, requests: u64) {
        let g = self.groups.entry(key(text)).or_insert_with(|| Group {
            first: order,
            excerpt: excerpt(text),
            ..Group::default()
        });
        g.conversations += 1;
        g.requests += requests;
        g.most_requests = g.most_requests.max(requests);
        if order < g.first {
            g.first = order;
            g.excerpt = excerpt(text);
        }
    }

    pub fn merge(&mut self, other: SessionKeys) {
        for (k, o) in other.groups {
            match self.groups.get_mut(&k) {
                None => {
                    self.groups.insert(k, o);
                }
                Some(g) => {
                    g.conversations += o.conversations;
                    g.requests += o.requests;
                    g.most_requests = g.most_requests.max(o.most_requests);
                    if o.first < g.first {
                        g.first = o.first;
                        g.excerpt = o.excerpt;
                    }
                }
            }
        }
    }

    /// Places in the input moved by `by` rows (a shard's rows after the shards before it);
    /// `None` when a place would pass the largest row number.
    pub fn shifted(mut self, by: u64) -> Option<SessionKeys> {
        for g in self.groups.values_mut() {
            g.first = g.first.checked_add(by)?;
        }
        Some(self)
    }

    pub fn collisions(&self, largest: usize) -> Collisions {
        let mut out = Collisions {
            distinct_keys: self.groups.len() as u64,
            ..Collisions::default()
        };
        let mut shared: Vec<(&[u8; 16], &Group)> = self
            .groups
            .iter()
            .filter(|(_, g)| g.conversations > 1)
            .collect();
        for (_, g) in &shared {
            out.shared_keys += 1;
            out.conversations_sharing += g.conversations;
            out.requests_sharing += g.requests;
            out.requests_misrouted += g.requests - g.most_requests;
        }
        // Ties broken by the first conversation's place in the input: deterministic.
        shared.sort_by_key(|(_, g)| (std::cmp::Reverse(g.conversations), g.first));
        out.largest = shared
            .into_iter()
            .take(largest)
            .map(|(k, g)| SharedKey {
                key: hex(k),
                conversations: g.conversations,
                requests: g.requests,
                excerpt: g.excerpt.clone(),
            })
            .collect();
        out
    }
}

fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
    if text.chars().nth(EXCERPT_CHARS).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn md5_of_the_first_user_message() {
        // hashlib.md5("hi".encode()).hexdigest() == "49f68a5c8493ec2c0bf489821c21fc3b"
        let k: String = key("hi").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(k, "49f68a5c8493ec2c0bf489821c21fc3b");
        let messages = vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "hi"}),
            json!({"role": "user", "content": "later"}),
        ];
        assert_eq!(first_user_text(&messages).as_deref(), Some("hi"));
        let parts = vec![json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})];
        assert_eq!(
            first_user_text(&parts).as_deref(),
            Some(r#"[{"type":"text","text":"hi"}]"#)
        );
        assert_eq!(first_user_text(&[json!({"role": "assistant"})]), None);
    }

    #[test]
    fn collisions_counted_by_hand() {
        // "hi" opens three conversations with 1, 4 and 2 turn-2+ requests; "help" one with 3;
        // "x" two with 1 each. Misrouted: hi 7 - 4 = 3, x 2 - 1 = 1.
        let mut a = SessionKeys::default();
        a.add("hi", 0, 1);
        a.add("help", 1, 3);
        a.add("x", 2, 1);
        let mut b = SessionKeys::default();
        b.add("hi", 4, 2);
        b.add("hi", 3, 4);
        b.add("x", 5, 1);
        a.merge(b);
        let c = a.collisions(10);
        assert_eq!(c.distinct_keys, 3);
        assert_eq!(c.shared_keys, 2);
        assert_eq!(c.conversations_sharing, 5);
        assert_eq!(c.requests_sharing, 9);
        assert_eq!(c.requests_misrouted, 4);
        assert_eq!(c.largest[0].conversations, 3);
        assert_eq!(c.largest[0].excerpt, "hi");
        assert_eq!(c.largest[1].excerpt, "x");
        assert_eq!(a.collisions(1).largest.len(), 1);
    }

    #[test]
    fn written_in_key_order_and_read_back() {
        let mut a = SessionKeys::default();
        a.add("hi", 3, 1);
        a.add("help", 1, 3);
        a.add("hi", 7, 2);
        let text = serde_json::to_string(&a).unwrap();
        // md5("help") = 657f8b8d..., md5("hi") = 49f68a5c...: key order, not input order;
        // each key [hex, conversations, requests, most_requests, first, excerpt].
        let hi = r#"["49f68a5c8493ec2c0bf489821c21fc3b",2,3,2,3,"hi"]"#;
        assert_eq!(
            text,
            format!(r#"[{hi},["657f8b8da628ef83cf69101b6817150a",1,3,3,1,"help"]]"#)
        );
        let back: SessionKeys = serde_json::from_str(&text).unwrap();
        assert_eq!(back.collisions(5), a.collisions(5));
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        let bad = text.replace("49f68a5c", "49f68a5z");
        assert!(serde_json::from_str::<SessionKeys>(&bad).is_err());
        let twice = format!("[{hi},{hi}]");
        assert!(serde_json::from_str::<SessionKeys>(&twice).is_err());
        // Shifting moves the first conversation of every key.
        let shifted = back.shifted(10).unwrap();
        assert!(
            serde_json::to_string(&shifted)
                .unwrap()
                .contains(r#",2,3,2,13,"hi"]"#)
        );
        assert!(a.shifted(u64::MAX).is_none());
        // One conversation with more requests than the key's conversations have together.
        let odd = text.replacen(",2,3,2,3,", ",2,3,9,3,", 1);
        assert_ne!(odd, text);
        // An excerpt longer than kvaudit writes.
        let long = text.replacen(r#""hi""#, &format!("{:?}", "y".repeat(62)), 1);
        assert!(serde_json::from_str::<SessionKeys>(&long).is_err());
        assert!(serde_json::from_str::<SessionKeys>(&odd).is_err());
    }
}
