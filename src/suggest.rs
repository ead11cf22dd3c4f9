//! "Did you mean": the known name closest to one a user typed, for errors and warnings about
//! misspelt keys (a conversation file's fields, a template's variables).

/// The candidate closest to `typed` by edit distance, when it is close enough to be a likely
/// typo: at most a third of the longer name's characters differ (at least one), ignoring case.
pub fn closest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let typed_lower = typed.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&typed_lower, &c.to_lowercase()), c))
        .filter(|(d, c)| {
            let longest = typed.chars().count().max(c.chars().count());
            *d <= (longest / 3).max(1)
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters (names are short: O(n·m) is nothing).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_are_suggested_far_ones_are_not() {
        let fields = [
            "messages",
            "tools",
            "template_kwargs",
            "now",
            "now_per_prompt",
        ];
        assert_eq!(closest("template_kwarg", fields), Some("template_kwargs"));
        assert_eq!(closest("Messages", fields), Some("messages"));
        assert_eq!(closest("tool", fields), Some("tools"));
        assert_eq!(
            closest("enable_thinkng", ["enable_thinking", "tools"]),
            Some("enable_thinking")
        );
        assert_eq!(closest("conversation", fields), None);
        assert_eq!(closest("x", fields), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
