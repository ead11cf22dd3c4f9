//! smg's HTTP cache-aware key: the request's text, matched character by character.

use serde_json::Value as Json;

/// The text smg routes a chat request by: every message's text, in order and without roles,
/// joined by one space (smg's `extract_text_for_routing`). A message's text is its string
/// `content`, or the `text` of its `{"type": "text"}` parts, then an assistant's
/// `reasoning_content` (or `reasoning`); empty texts add nothing, not even a space.
pub fn routing_text(messages: &[Json]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for m in messages {
        match m.get("content") {
            Some(Json::String(s)) => parts.push(s),
            Some(Json::Array(items)) => {
                for it in items {
                    if it.get("type").and_then(Json::as_str) == Some("text")
                        && let Some(Json::String(s)) = it.get("text")
                    {
                        parts.push(s);
                    }
                }
            }
            _ => {}
        }
        if m.get("role").and_then(Json::as_str) == Some("assistant")
            && let Some(Json::String(s)) = m.get("reasoning_content").or_else(|| m.get("reasoning"))
        {
            parts.push(s);
        }
    }
    parts.retain(|p| !p.is_empty());
    parts.join(" ")
}

/// Characters (Unicode scalar values, as smg's tree counts them) `a` and `b` start with.
pub fn common_chars(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn contents_joined_by_a_space_without_roles() {
        let m = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "there"}]}),
            json!({"role": "assistant", "content": "Hello", "reasoning_content": "greet"}),
            json!({"role": "assistant", "content": null, "tool_calls": []}),
            json!({"role": "user", "content": ""}),
            json!({"role": "tool", "content": "42"}),
        ];
        assert_eq!(routing_text(&m), "Be brief. Hi there Hello greet 42");
        assert_eq!(common_chars("héllo wörld", "héllo world"), 7);
    }
}
