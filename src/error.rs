//! How an error is told to a person: each error in a chain says only its own part (none
//! prints its source), so the chain joined is the whole story, once. Every place that shows
//! an error as text uses this.

/// `e` and its causes, joined by ": ".
pub fn chain_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for (i, cause) in e.chain().enumerate() {
        if i > 0 {
            text.push_str(": ");
        }
        text.push_str(&cause.to_string());
    }
    text
}
