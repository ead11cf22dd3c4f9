//! Why turn k+1 diverged from the holdings, decided from the texts, never from the model name.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteClass {
    /// The reply's reasoning is not rendered back in history.
    ReasoningDropped,
    /// The generation prompt pre-filled text (an empty think block) that history omits.
    GenerationPrefillNotReplayed,
    /// `strftime_now` printed another date in the next prompt.
    DateChanged,
    /// The request changed its kwargs or tools since the held prompt (a per-request setting
    /// the template prints before the history ends).
    RequestChanged,
    /// History trims whitespace the model generated.
    ContentTrimmed,
    /// The system prompt is rendered at another place in the next prompt.
    SystemMoved,
    /// Same characters, different tokens.
    Retokenized,
    Other,
}

impl RewriteClass {
    pub fn name(self) -> &'static str {
        match self {
            RewriteClass::ReasoningDropped => "reasoning_dropped",
            RewriteClass::GenerationPrefillNotReplayed => "generation_prefill_not_replayed",
            RewriteClass::DateChanged => "date_changed",
            RewriteClass::RequestChanged => "request_changed",
            RewriteClass::ContentTrimmed => "content_trimmed",
            RewriteClass::SystemMoved => "system_moved",
            RewriteClass::Retokenized => "retokenized",
            RewriteClass::Other => "other",
        }
    }
}

/// Serialized by its one name, so JSON and human output cannot disagree.
impl Serialize for RewriteClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

pub struct Evidence<'a> {
    pub held_text: String,
    pub prompt_text: &'a str,
    pub generated_text: &'a str,
    pub next_text: &'a str,
    pub reasoning: Option<&'a str>,
    /// The conversation's system prompt, trimmed, when it is not empty: a searcher built
    /// once per conversation (a long prompt costs as much to prepare as to look for).
    pub system: Option<&'a memchr::memmem::Finder<'a>>,
    /// Token LCP against the next prompt rendered at the held prompt's time.
    pub lcp_same_day: Option<usize>,
    /// Token LCP against the next prompt rendered with the held prompt's kwargs and tools.
    pub lcp_same_request: Option<usize>,
    pub lcp: usize,
}

/// Bytes of the longest common prefix of whole characters: the common bytes, moved back to
/// the character boundary before the first that differs (the bytes before it are the same in
/// both, so are their boundaries), rather than a walk that decodes every character.
fn text_common_prefix(a: &str, b: &str) -> usize {
    let mut n = super::common_prefix(a.as_bytes(), b.as_bytes());
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// The searcher [`Evidence::system`] takes: for the system prompt trimmed, if anything is left.
pub fn system_finder(system: Option<&str>) -> Option<memchr::memmem::Finder<'_>> {
    system
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(memchr::memmem::Finder::new)
}

/// Where the reasoning block of a generated text ends (byte offset), if it has one.
fn reasoning_block_end(generated: &str) -> Option<usize> {
    if let Some(i) = generated.find("</think>") {
        return Some(i + "</think>".len());
    }
    let analysis = generated.find("<|channel|>analysis<|message|>")?;
    generated[analysis..]
        .find("<|end|>")
        .map(|i| analysis + i + "<|end|>".len())
}

/// The answer part of a generated text: after the reasoning block when there is one.
fn answer_part(generated: &str) -> &str {
    for end in ["</think>", "<|channel|>final<|message|>"] {
        if let Some(i) = generated.rfind(end) {
            return &generated[i + end.len()..];
        }
    }
    generated
}

pub fn classify(e: &Evidence) -> RewriteClass {
    let held = e.held_text.as_str();
    let next = e.next_text;
    if next.starts_with(held) {
        return RewriteClass::Retokenized;
    }
    // Whichever re-render moves the divergence further is the cause.
    let moved = |other: Option<usize>| other.filter(|&l| l > e.lcp);
    match (moved(e.lcp_same_day), moved(e.lcp_same_request)) {
        (Some(day), Some(request)) if request > day => return RewriteClass::RequestChanged,
        (Some(_), _) => return RewriteClass::DateChanged,
        (None, Some(_)) => return RewriteClass::RequestChanged,
        (None, None) => {}
    }
    let at = text_common_prefix(held, next);
    let prompt_len = e.prompt_text.len();

    // A first occurrence before the divergence rules the class out without looking in the
    // next prompt.
    if let Some(system) = e.system
        && let Some(h) = system.find(held.as_bytes())
        && at <= h
        && system.find(next.as_bytes()).is_some_and(|n| n != h)
    {
        return RewriteClass::SystemMoved;
    }
    if let Some(end) = reasoning_block_end(e.generated_text) {
        // The reply opened with a reasoning block (possibly empty) that history does not repeat.
        let block_end = (prompt_len + end).min(held.len());
        let reasoning = e.reasoning.map(str::trim).unwrap_or("");
        let kept = || {
            if reasoning.is_empty() {
                next[at..].starts_with(&held[at..block_end])
            } else {
                next[at..].contains(reasoning)
            }
        };
        if at < block_end && !kept() {
            return RewriteClass::ReasoningDropped;
        }
    }
    let answer = answer_part(e.generated_text).trim_start();
    let probe: String = answer.chars().take(24).collect();
    if at < prompt_len && !probe.is_empty() && next[at..].trim_start().starts_with(&probe) {
        return RewriteClass::GenerationPrefillNotReplayed;
    }
    if at >= prompt_len {
        let rest = &held[at..];
        let rest_trim = rest.trim_start();
        if rest.trim().is_empty()
            || (rest_trim.len() < rest.len() && next[at..].trim_start().starts_with(rest_trim))
        {
            return RewriteClass::ContentTrimmed;
        }
    }
    RewriteClass::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_common_prefix_stops_before_the_first_differing_character() {
        assert_eq!(text_common_prefix("", "abc"), 0);
        assert_eq!(text_common_prefix("abc", "abc"), 3);
        assert_eq!(text_common_prefix("abc", "abcdef"), 3);
        // é and è share their first byte: the prefix ends before the character.
        assert_eq!(text_common_prefix("aé", "aè"), 1);
        let long = "0123456789abcdefghij".repeat(3);
        for at in 0..long.len() {
            let mut other = long.clone().into_bytes();
            other[at] = b'#';
            let other = String::from_utf8(other).unwrap();
            assert_eq!(text_common_prefix(&long, &other), at);
        }
        let wide = "日本語のテキスト".repeat(2);
        let cut = "日本語のテキスト日本語のテ";
        assert_eq!(text_common_prefix(&wide, &format!("{cut}X")), cut.len());
        assert_eq!(
            text_common_prefix(&wide, &format!("{cut}\u{30AD}")),
            cut.len() + 3
        );
    }

    fn ev<'a>(prompt: &'a str, generated: &'a str, next: &'a str) -> Evidence<'a> {
        Evidence {
            held_text: format!("{prompt}{generated}"),
            prompt_text: prompt,
            generated_text: generated,
            next_text: next,
            reasoning: None,
            system: None,
            lcp_same_day: None,
            lcp_same_request: None,
            lcp: 0,
        }
    }

    #[test]
    fn empty_think_prefill() {
        let e = ev(
            "<u>Q<a><think>\n\n</think>\n\n",
            "A.",
            "<u>Q<a>A.<e><u>F<a>",
        );
        assert_eq!(classify(&e), RewriteClass::GenerationPrefillNotReplayed);
    }

    #[test]
    fn reasoning_dropped() {
        let mut e = ev(
            "<u>Q<a>",
            "<think>\nR here\n</think>\n\nA.",
            "<u>Q<a>A.<e><u>F<a>",
        );
        e.reasoning = Some("R here");
        assert_eq!(classify(&e), RewriteClass::ReasoningDropped);
    }

    #[test]
    fn empty_reasoning_block_dropped() {
        let e = ev(
            "<u>Q<a>",
            "<think>\n\n</think>\n\nA.",
            "<u>Q<a>A.<e><u>F<a>",
        );
        assert_eq!(classify(&e), RewriteClass::ReasoningDropped);
    }

    #[test]
    fn trailing_newline_trimmed() {
        let e = ev("<u>Q<a>", "A.\n", "<u>Q<a>A.<e><u>F<a>");
        assert_eq!(classify(&e), RewriteClass::ContentTrimmed);
    }

    #[test]
    fn retokenized_and_other() {
        let e = ev("<u>Q<a>", "A.", "<u>Q<a>A.<e>");
        assert_eq!(classify(&e), RewriteClass::Retokenized);
        let e = ev("<u>Q<a>", "A.", "<x>");
        assert_eq!(classify(&e), RewriteClass::Other);
    }

    #[test]
    fn system_moved_and_date() {
        let mut e = ev(
            "<s>[INST]SYS\n\nQ[/INST]",
            "A.",
            "<s>[INST]Q[/INST]A.</s>[INST]SYS\n\nF[/INST]",
        );
        let system = system_finder(Some(" SYS\n"));
        e.system = system.as_ref();
        assert_eq!(classify(&e), RewriteClass::SystemMoved);
        // Where both prompts start with the system prompt, it did not move.
        let mut e = ev("SYS<u>Q<a>", "A.", "SYS<u>Q<a>B.");
        e.system = system.as_ref();
        assert_ne!(classify(&e), RewriteClass::SystemMoved);
        assert!(system_finder(Some(" \n")).is_none());
        let mut e = ev("D15<u>Q<a>", "A.", "D16<u>Q<a>A.");
        e.lcp = 1;
        e.lcp_same_day = Some(9);
        assert_eq!(classify(&e), RewriteClass::DateChanged);
    }

    #[test]
    fn request_change_is_told_from_date_change() {
        let mut e = ev("E1<u>Q<a>", "A.", "E2<u>Q<a>A.");
        e.lcp = 1;
        e.lcp_same_request = Some(9);
        assert_eq!(classify(&e), RewriteClass::RequestChanged);
        // Both moved: the one that moves it further explains more of it.
        e.lcp_same_day = Some(4);
        assert_eq!(classify(&e), RewriteClass::RequestChanged);
        e.lcp_same_day = Some(12);
        assert_eq!(classify(&e), RewriteClass::DateChanged);
    }
}
