//! A conversation to audit: messages as the client sends them, plus tools, kwargs and clocks.

use std::path::Path;

use chrono::{Duration, NaiveDate, NaiveDateTime, NaiveTime};
use serde_json::{Map, Value as Json};

use super::resend::ResendMode;

/// `v[key]` of a JSON object, found by comparing the keys in order: a message has a handful,
/// and serde_json's map would hash the key with SipHash for each lookup (most of a lookup's
/// cost on a corpus). Keys of a map are unique, so this is the entry `get` finds.
pub fn field<'a>(v: &'a Json, key: &str) -> Option<&'a Json> {
    entry(v.as_object()?, key)
}

/// [`field`] of a map.
pub fn entry<'a>(map: &'a Map<String, Json>, key: &str) -> Option<&'a Json> {
    // Past a few keys the hash is cheaper than the comparisons.
    if map.len() > 8 {
        return map.get(key);
    }
    map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

/// Where the last reply (`assistant` message) is: what precedes it is the request it
/// answered.
pub fn last_reply(messages: &[Json]) -> Option<usize> {
    messages
        .iter()
        .rposition(|m| field(m, "role").and_then(Json::as_str) == Some("assistant"))
}

#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    #[error("cannot read conversation {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("conversation {path} is not valid JSON")]
    Json {
        path: String,
        source: serde_json::Error,
    },
    #[error("conversation {path}: {message}")]
    Invalid { path: String, message: String },
    /// Valid JSON of the wrong shape (a misspelt field, a wrong type).
    #[error("{path} is not a conversation: {why}")]
    Shape { path: String, why: ShapeError },
}

/// How valid JSON misses the shape of a conversation file.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// Neither an object nor a list: what the file holds instead ("a string").
    #[error("the file holds {0}, not an object with `messages` or a list of messages")]
    NotAnObject(&'static str),
    #[error("unknown field `{field}` ({})", unknown_field_hint(*.near))]
    UnknownField {
        field: String,
        near: Option<&'static str>,
    },
    #[error("no `messages` list")]
    NoMessages,
    /// The serde error is part of the message rather than a source: the conversation error
    /// that carries this one prints it in its own message, and a chain would print it twice.
    #[error("`{field}`: {error}")]
    FieldType {
        field: &'static str,
        error: serde_json::Error,
    },
}

fn unknown_field_hint(near: Option<&str>) -> String {
    match near {
        Some(near) => format!("did you mean `{near}`?"),
        None => format!("a conversation has: {}", FIELDS.join(", ")),
    }
}

/// The largest conversation file read: real multi-turn logs are kilobytes to a few megabytes,
/// and every prompt re-renders the whole history, so time grows with the square of this.
pub const MAX_CONVERSATION_BYTES: u64 = 8 << 20;

/// The most messages one conversation may have (the longest agent runs in the corpus have a
/// few hundred).
pub const MAX_MESSAGES: usize = 10_000;

/// When each prompt is rendered; templates that call `strftime_now` print this date.
#[derive(Debug, Clone, PartialEq)]
pub enum Clock {
    Fixed(NaiveDateTime),
    /// One time per rendered prompt, in order; the last repeats if there are more prompts.
    PerPrompt(Vec<NaiveDateTime>),
    /// Prompt 1 at 23:59 on this day, every later prompt at 00:01 one day after the previous.
    Rollover(NaiveDate),
}

impl Clock {
    /// The time of prompt `index` (0-based).
    pub fn at(&self, index: usize) -> NaiveDateTime {
        match self {
            Clock::Fixed(t) => *t,
            Clock::PerPrompt(times) => times[index.min(times.len() - 1)],
            Clock::Rollover(day) => {
                if index == 0 {
                    day.and_time(NaiveTime::from_hms_opt(23, 59, 0).unwrap_or_default())
                } else {
                    // Past the last representable day the clock stays there: parse_time keeps
                    // user times within Python's datetime range, far from it.
                    day.checked_add_signed(Duration::days(index.min(1 << 30) as i64))
                        .unwrap_or(NaiveDate::MAX)
                        .and_time(NaiveTime::from_hms_opt(0, 1, 0).unwrap_or_default())
                }
            }
        }
    }

    /// The same clock moved so that every prompt is rendered on the same day as prompt 0.
    pub fn frozen(&self) -> Clock {
        Clock::Fixed(self.at(0))
    }
}

/// Accepts `2026-01-15T10:00:00`, `2026-01-15T10:00`, a space instead of `T`, or a bare date,
/// within Python's `datetime` range (years 1 to 9999), which is what templates format.
///
/// A zone (`Z`, `+02:00`, `-0500`) is read and then dropped: the result is the wall-clock time
/// at that offset, not converted to UTC or to this machine's zone. transformers'
/// `strftime_now` formats the serving machine's local time, so `10:00+02:00` is what a server
/// running at UTC+2 prints at that instant.
pub fn parse_time(text: &str) -> Option<NaiveDateTime> {
    use chrono::Datelike;
    let text = text.trim();
    parse_any_time(text)
        .or_else(|| parse_zoned_time(text))
        .filter(|t| (1..=9999).contains(&t.year()))
}

/// A time with a zone suffix, as the wall clock at that offset.
fn parse_zoned_time(text: &str) -> Option<NaiveDateTime> {
    // `Z` is the +00:00 offset; chrono's `%z` does not read the letter.
    let text = match text.strip_suffix(['Z', 'z']) {
        Some(rest) => format!("{rest}+00:00"),
        None => text.to_string(),
    };
    [
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%dT%H:%M%z",
        "%Y-%m-%d %H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M%z",
    ]
    .iter()
    .find_map(|fmt| chrono::DateTime::parse_from_str(&text, fmt).ok())
    .map(|t| t.naive_local())
}

fn parse_any_time(text: &str) -> Option<NaiveDateTime> {
    for fmt in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S%.f",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, fmt) {
            return Some(t);
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .map(|d| d.and_time(NaiveTime::MIN))
}

/// A conversation ready for rendering.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// File path or probe name, reported as `source`.
    pub source: String,
    pub messages: Vec<Json>,
    pub tools: Option<Json>,
    pub documents: Option<Json>,
    pub template_kwargs: Map<String, Json>,
    /// One object per rendered prompt, merged over `template_kwargs` (a client that changes
    /// `chat_template_kwargs` between requests); the last repeats. Empty: the same every prompt.
    pub kwargs_per_prompt: Vec<Map<String, Json>>,
    /// One tool list (or null) per rendered prompt, instead of `tools` (an agent that adds or
    /// removes tools between requests); the last repeats. Empty: `tools` for every prompt.
    pub tools_per_prompt: Vec<Option<Json>>,
    /// `None` means "use the caller's default clock".
    pub clock: Option<Clock>,
    /// How assistant replies are sent back in later prompts.
    pub resend: ResendMode,
}

/// The fields of a conversation file, for the unknown-field check.
pub const FIELDS: [&str; 8] = [
    "messages",
    "tools",
    "documents",
    "template_kwargs",
    "now",
    "now_per_prompt",
    "template_kwargs_per_prompt",
    "tools_per_prompt",
];

#[derive(Default)]
struct ConversationFile {
    messages: Vec<Json>,
    tools: Option<Json>,
    documents: Option<Json>,
    template_kwargs: Option<Map<String, Json>>,
    template_kwargs_per_prompt: Option<Vec<Map<String, Json>>>,
    tools_per_prompt: Option<Vec<Json>>,
    now: Option<String>,
    now_per_prompt: Option<Vec<String>>,
}

impl Conversation {
    /// Plain messages with nothing else set: no tools, documents, kwargs or clock of their own.
    pub fn of_messages(source: &str, messages: Vec<Json>, resend: ResendMode) -> Conversation {
        Conversation {
            source: source.to_string(),
            messages,
            tools: None,
            documents: None,
            template_kwargs: Map::new(),
            kwargs_per_prompt: Vec::new(),
            tools_per_prompt: Vec::new(),
            clock: None,
            resend,
        }
    }

    /// The kwargs of prompt `index` (0-based): `template_kwargs`, then that prompt's own.
    pub fn kwargs_at(&self, index: usize) -> Map<String, Json> {
        let mut kwargs = self.template_kwargs.clone();
        if let Some(own) = per_prompt(&self.kwargs_per_prompt, index) {
            for (k, v) in own {
                kwargs.insert(k.clone(), v.clone());
            }
        }
        kwargs
    }

    /// The tools of prompt `index` (0-based).
    pub fn tools_at(&self, index: usize) -> Option<&Json> {
        match per_prompt(&self.tools_per_prompt, index) {
            Some(tools) => tools.as_ref(),
            None => self.tools.as_ref(),
        }
    }

    /// Tools of some prompt, for choosing the template: one conversation renders with one
    /// template, the `tool_use` one when any request carries tools.
    pub fn any_tools(&self) -> Option<&Json> {
        self.tools
            .as_ref()
            .or_else(|| self.tools_per_prompt.iter().flatten().next())
    }

    pub fn from_file(path: &Path) -> Result<Conversation, ConversationError> {
        let shown = path.display().to_string();
        let text = crate::input::read_text(path, MAX_CONVERSATION_BYTES).map_err(|source| {
            ConversationError::Read {
                path: shown.clone(),
                source,
            }
        })?;
        Conversation::from_json_text(&text, &shown)
    }

    /// A conversation piped in (`-c -`), with the same size limit as a file.
    pub fn from_reader(
        reader: impl std::io::Read,
        shown: &str,
    ) -> Result<Conversation, ConversationError> {
        let text =
            crate::input::read_stream_text(reader, MAX_CONVERSATION_BYTES).map_err(|source| {
                ConversationError::Read {
                    path: shown.to_string(),
                    source,
                }
            })?;
        Conversation::from_json_text(&text, shown)
    }

    /// A UTF-8 byte order mark is skipped: editors on Windows write one, and Python's
    /// `json.load` of a file opened as `utf-8-sig` reads the same conversation.
    pub fn from_json_text(text: &str, source: &str) -> Result<Conversation, ConversationError> {
        let invalid = |message: String| ConversationError::Invalid {
            path: source.to_string(),
            message,
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let value: Json = serde_json::from_str(text).map_err(|e| {
            // serde_json calls this "unexpected end of hex escape" or the like; name it.
            if let Some((line, column)) = lone_surrogate(text) {
                invalid(format!(
                    "line {line} column {column}: a \\u escape is half of a UTF-16 surrogate \
                     pair, which is not a character (no tokenizer can encode it)"
                ))
            } else if e.line() > 1 && looks_like_json_lines(text) {
                invalid(format!(
                    "line {}: a second JSON value: the file looks like JSON Lines (a corpus, \
                     one conversation per line); `kvaudit corpus {source}` audits every line",
                    e.line()
                ))
            } else {
                ConversationError::Json {
                    path: source.to_string(),
                    source: e,
                }
            }
        })?;
        Conversation::from_value(value, source)
    }

    /// A conversation from its parsed JSON (a corpus row, already read and split).
    pub fn from_value(value: Json, source: &str) -> Result<Conversation, ConversationError> {
        let invalid = |message: String| ConversationError::Invalid {
            path: source.to_string(),
            message,
        };
        let file = file_shape(value).map_err(|why| ConversationError::Shape {
            path: source.to_string(),
            why,
        })?;
        if file.messages.len() > MAX_MESSAGES {
            return Err(invalid(format!(
                "{} messages, more than the {MAX_MESSAGES} kvaudit audits in one conversation",
                file.messages.len()
            )));
        }
        let time = |t: &str| {
            parse_time(t).ok_or_else(|| {
                invalid(format!(
                    "cannot read time {t:?} (expected e.g. 2026-01-15T10:00:00)"
                ))
            })
        };
        let clock = match (file.now, file.now_per_prompt) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "give either `now` or `now_per_prompt`, not both".into(),
                ));
            }
            (Some(t), None) => Some(Clock::Fixed(time(&t)?)),
            (None, Some(list)) if list.is_empty() => {
                return Err(invalid("`now_per_prompt` is empty".into()));
            }
            (None, Some(list)) => Some(Clock::PerPrompt(
                list.iter().map(|t| time(t)).collect::<Result<_, _>>()?,
            )),
            (None, None) => None,
        };
        if let Some(tools) = &file.tools
            && !tools.is_array()
            && !tools.is_null()
        {
            return Err(invalid("`tools` must be a list of tool schemas".into()));
        }
        if file.tools.is_some() && file.tools_per_prompt.is_some() {
            return Err(invalid(
                "give either `tools` or `tools_per_prompt`, not both".into(),
            ));
        }
        if file
            .template_kwargs_per_prompt
            .as_ref()
            .is_some_and(Vec::is_empty)
        {
            return Err(invalid("`template_kwargs_per_prompt` is empty".into()));
        }
        let tools_per_prompt = match file.tools_per_prompt {
            Some(list) if list.is_empty() => {
                return Err(invalid("`tools_per_prompt` is empty".into()));
            }
            Some(list) => {
                let mut out = Vec::with_capacity(list.len());
                for (i, tools) in list.into_iter().enumerate() {
                    if !tools.is_array() && !tools.is_null() {
                        return Err(invalid(format!(
                            "`tools_per_prompt` entry {i} must be a list of tool schemas or null"
                        )));
                    }
                    out.push(Some(tools).filter(|t| !t.is_null()));
                }
                out
            }
            None => Vec::new(),
        };
        for (i, m) in file.messages.iter().enumerate() {
            let Some(obj) = m.as_object() else {
                return Err(invalid(format!("message {i} is not an object")));
            };
            match entry(obj, "role").and_then(Json::as_str) {
                Some(_) => {}
                None => return Err(invalid(format!("message {i} has no string `role`"))),
            }
            if let Some(ids) = entry(obj, "generated_ids") {
                let ok = ids.as_array().is_some_and(|a| {
                    a.iter()
                        .all(|x| x.as_u64().is_some_and(|v| v <= u32::MAX as u64))
                });
                if !ok {
                    return Err(invalid(format!(
                        "message {i}: `generated_ids` must be a list of token ids"
                    )));
                }
            }
            if entry(obj, "generated").is_some_and(|g| !g.is_string()) {
                return Err(invalid(format!(
                    "message {i}: `generated` must be a string"
                )));
            }
        }
        Ok(Conversation {
            source: source.to_string(),
            messages: file.messages,
            tools: file.tools.filter(|t| !t.is_null()),
            documents: file.documents.filter(|d| !d.is_null()),
            template_kwargs: file.template_kwargs.unwrap_or_default(),
            kwargs_per_prompt: file.template_kwargs_per_prompt.unwrap_or_default(),
            tools_per_prompt,
            clock,
            resend: ResendMode::AsGiven,
        })
    }
}

/// The fields of a conversation file, or a bare list of messages (what an OpenAI request's
/// `messages` holds, and what logs often store).
fn file_shape(value: Json) -> Result<ConversationFile, ShapeError> {
    let object = match value {
        Json::Array(messages) => {
            return Ok(ConversationFile {
                messages,
                ..ConversationFile::default()
            });
        }
        Json::Object(object) => object,
        other => {
            let kind = match other {
                Json::Null => "null",
                Json::Bool(_) => "a boolean",
                Json::Number(_) => "a number",
                _ => "a string",
            };
            return Err(ShapeError::NotAnObject(kind));
        }
    };
    if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ShapeError::UnknownField {
            field: unknown.clone(),
            near: crate::suggest::closest(unknown, FIELDS),
        });
    }
    if !object.contains_key("messages") {
        return Err(ShapeError::NoMessages);
    }
    // Field by field, so a wrong type names its field (serde's own error does not).
    let mut object = object;
    let mut field = |name: &str| object.remove(name).unwrap_or(Json::Null);
    fn typed<T: serde::de::DeserializeOwned>(
        field: &'static str,
        v: Json,
    ) -> Result<T, ShapeError> {
        serde_json::from_value(v).map_err(|error| ShapeError::FieldType { field, error })
    }
    Ok(ConversationFile {
        // A list is taken as it is: through serde every message would be rebuilt.
        messages: match field("messages") {
            Json::Array(messages) => messages,
            other => typed("messages", other)?,
        },
        tools: typed("tools", field("tools"))?,
        documents: typed("documents", field("documents"))?,
        template_kwargs: typed("template_kwargs", field("template_kwargs"))?,
        now: typed("now", field("now"))?,
        now_per_prompt: typed("now_per_prompt", field("now_per_prompt"))?,
        template_kwargs_per_prompt: typed(
            "template_kwargs_per_prompt",
            field("template_kwargs_per_prompt"),
        )?,
        tools_per_prompt: typed("tools_per_prompt", field("tools_per_prompt"))?,
    })
}

/// Entry `index` of a per-prompt list, the last repeating; `None` for an empty list.
fn per_prompt<T>(list: &[T], index: usize) -> Option<&T> {
    list.get(index.min(list.len().saturating_sub(1)))
}

/// Whether `text` holds one JSON value per line: its first non-blank line is a whole value and
/// another line follows.
fn looks_like_json_lines(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    match (lines.next(), lines.next()) {
        (Some(first), Some(_)) => serde_json::from_str::<serde::de::IgnoredAny>(first).is_ok(),
        _ => false,
    }
}

/// Where the first `\\uD800`–`\\uDFFF` escape without its pair is (1-based line, column).
fn lone_surrogate(text: &str) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let hex = |at: usize| -> Option<u16> {
        let digits = b.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let escape_at = |at: usize| b.get(at) == Some(&b'\\') && b.get(at + 1) == Some(&b'u');
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b[i + 1] != b'u' {
            i += 2; // an escaped character, possibly a backslash
            continue;
        }
        let unit = hex(i + 2);
        let paired = |u: u16| {
            (0xD800..0xDC00).contains(&u)
                && escape_at(i + 6)
                && hex(i + 8).is_some_and(|l| (0xDC00..0xE000).contains(&l))
        };
        match unit {
            Some(u) if paired(u) => i += 12,
            Some(u) if (0xD800..0xE000).contains(&u) => {
                let line = text[..i].matches('\n').count() + 1;
                let column = i - text[..i].rfind('\n').map_or(0, |p| p + 1) + 1;
                return Some((line, column));
            }
            _ => i += 6,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_finds_what_get_finds() {
        for n in [0usize, 1, 2, 8, 9, 20] {
            let obj: Map<String, Json> = (0..n).map(|i| (format!("k{i}"), Json::from(i))).collect();
            let v = Json::Object(obj.clone());
            for key in (0..n + 2)
                .map(|i| format!("k{i}"))
                .chain(["".into(), "k".into()])
            {
                assert_eq!(field(&v, &key), obj.get(&key), "{n} keys, {key}");
                assert_eq!(entry(&obj, &key), obj.get(&key));
            }
        }
        assert_eq!(field(&Json::from("k0"), "k0"), None);
    }

    #[test]
    fn rollover_crosses_midnight_each_prompt() {
        let c = Clock::Rollover(NaiveDate::from_ymd_opt(2026, 1, 15).unwrap());
        assert_eq!(c.at(0).to_string(), "2026-01-15 23:59:00");
        assert_eq!(c.at(1).to_string(), "2026-01-16 00:01:00");
        assert_eq!(c.at(2).to_string(), "2026-01-17 00:01:00");
    }

    #[test]
    fn zoned_times_keep_the_wall_clock_of_their_offset() {
        let want = parse_time("2026-01-15T10:00:00").unwrap();
        for text in [
            "2026-01-15T10:00:00Z",
            "2026-01-15T10:00:00+02:00",
            "2026-01-15T10:00:00-05:00",
            "2026-01-15T10:00:00+0530",
            "2026-01-15T10:00Z",
            "2026-01-15 10:00:00+02:00",
            "2026-01-15T10:00:00.000Z",
        ] {
            assert_eq!(parse_time(text), Some(want), "{text}");
        }
        assert_eq!(parse_time("2026-01-15T10:00:00+25:00"), None);
        assert_eq!(parse_time("2026-01-15T10:00:00 Europe/Paris"), None);
    }

    #[test]
    fn times_stay_in_pythons_datetime_range() {
        assert!(parse_time("2026-01-15T10:00:00").is_some());
        assert!(parse_time("+262142-12-31T23:00:00").is_none());
        assert!(parse_time("0000-01-01").is_none());
        let last = Clock::Rollover(NaiveDate::from_ymd_opt(9999, 12, 31).unwrap());
        assert_eq!(last.at(usize::MAX).date(), NaiveDate::MAX);
    }

    #[test]
    fn per_prompt_kwargs_and_tools_merge_and_the_last_repeats() {
        let text = r#"{"messages": [{"role": "user", "content": "hi"}],
            "template_kwargs": {"a": 1, "b": 1},
            "template_kwargs_per_prompt": [{}, {"b": 2}],
            "tools_per_prompt": [null, [{"type": "function"}]]}"#;
        let c = Conversation::from_json_text(text, "c").unwrap();
        assert_eq!(
            Json::Object(c.kwargs_at(0)),
            serde_json::json!({"a": 1, "b": 1})
        );
        assert_eq!(
            Json::Object(c.kwargs_at(1)),
            serde_json::json!({"a": 1, "b": 2})
        );
        assert_eq!(c.kwargs_at(7), c.kwargs_at(1));
        assert_eq!(c.tools_at(0), None);
        assert!(c.tools_at(5).is_some_and(Json::is_array));
        assert!(c.any_tools().is_some());
        // Without per-prompt lists every prompt gets the conversation's own.
        let plain = Conversation::from_json_text(
            r#"{"messages": [], "tools": [], "template_kwargs": {"a": 1}}"#,
            "c",
        )
        .unwrap();
        assert_eq!(plain.tools_at(3), plain.tools.as_ref());
        assert_eq!(plain.kwargs_at(3), plain.template_kwargs);
    }

    #[test]
    fn bom_is_skipped_and_surrogates_are_named() {
        let ok = "\u{feff}{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
        assert_eq!(
            Conversation::from_json_text(ok, "c")
                .unwrap()
                .messages
                .len(),
            1
        );
        let bad = r#"{"messages": [{"role": "user", "content": "\ud800"}]}"#;
        let err = Conversation::from_json_text(bad, "c")
            .unwrap_err()
            .to_string();
        assert!(err.contains("surrogate") && err.contains("line 1"), "{err}");
    }

    #[test]
    fn shape_errors_are_not_called_invalid_json() {
        let err = |text: &str| {
            Conversation::from_json_text(text, "c.json")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(r#"{"messages": [], "template_kwarg": {}}"#),
            "c.json is not a conversation: unknown field `template_kwarg` (did you mean `template_kwargs`?)"
        );
        assert_eq!(
            err(r#"{"messages": [], "conversation_id": 3}"#),
            "c.json is not a conversation: unknown field `conversation_id` (a conversation has: \
             messages, tools, documents, template_kwargs, now, now_per_prompt, \
             template_kwargs_per_prompt, tools_per_prompt)"
        );
        assert_eq!(
            err(r#"{"tools": []}"#),
            "c.json is not a conversation: no `messages` list"
        );
        assert_eq!(
            err(r#"{"messages": [], "now": 5}"#),
            "c.json is not a conversation: `now`: invalid type: integer `5`, expected a string"
        );
        assert_eq!(
            err(r#""hello""#),
            "c.json is not a conversation: the file holds a string, not an object with \
             `messages` or a list of messages"
        );
        // A bare message array is a conversation.
        let bare = r#"[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]"#;
        let c = Conversation::from_json_text(bare, "c.json").unwrap();
        assert_eq!(c.messages.len(), 2);
        assert!(c.tools.is_none() && c.clock.is_none());
        let bad = r#"[{"content": "hi"}]"#;
        assert_eq!(
            err(bad),
            "conversation c.json: message 0 has no string `role`"
        );
    }

    #[test]
    fn json_errors_carry_line_and_column() {
        let err = Conversation::from_json_text("{\"messages\": [\n  {\"role\": }]}", "c.json")
            .unwrap_err();
        // The error names the file; the JSON parser's position is its source, printed once.
        assert_eq!(err.to_string(), "conversation c.json is not valid JSON");
        let chain = format!("{:#}", anyhow::Error::from(err));
        assert!(
            chain.contains(": ") && chain.contains("line 2 column"),
            "{chain}"
        );
    }
}
