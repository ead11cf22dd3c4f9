//! The GPT-4-style split of Llama 3 and Qwen2/3, decided by hand where the text is ASCII.
//!
//! These patterns match at every position, and most of a chat is ASCII. Running the regex
//! automaton costs a search call per piece; for an ASCII piece the match follows from a few
//! byte classes. Where any byte the decision depends on is not ASCII (a letter such as `é`
//! may continue a word, `ſ` folds to `s`, U+00A0 is white space) this says nothing and the
//! regex decides, so the pieces are the regex's in every case.

/// The `X` of `X|\s*[\r\n]+|\s+(?!\S)|\s+` (CR and LF as escapes) for which [`piece`] holds,
/// with the most digits the number branch takes. The third is Qwen3.5's, whose `\p{M}` has no
/// ASCII member, so it splits ASCII as the first does.
pub(super) const KNOWN: [(&str, usize); 3] = [
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*",
        1,
    ),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*",
        3,
    ),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*",
        1,
    ),
];

/// The hand split for a pattern whose head is `x`, if it is one of [`KNOWN`].
pub fn for_head(x: &str) -> Option<AsciiSplit> {
    let x = x.replace('\r', r"\r").replace('\n', r"\n");
    KNOWN
        .iter()
        .find(|(known, _)| *known == x)
        .map(|&(_, digits)| AsciiSplit { digits })
}

#[derive(Debug, Clone, Copy)]
pub struct AsciiSplit {
    digits: usize,
}

/// `\s` restricted to ASCII (Unicode White_Space).
fn space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

/// How many of the eight bytes of `w` (the first in its low byte) are ASCII letters before the
/// first that is not: 8 when all are.
fn leading_letters(w: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Lower case folded in, and each byte's high bit cleared so that the additions below
    // cannot carry into the next byte; a byte with its high bit set is no letter.
    let x = (w | (0x20 * ONES)) & !HIGH;
    let at_least_a = x + (0x80 - u64::from(b'a')) * ONES;
    let past_z = x + (0x80 - u64::from(b'z') - 1) * ONES;
    let letter = at_least_a & !past_z & !w & HIGH;
    ((!letter & HIGH).trailing_zeros() / 8) as usize
}

/// ASCII outside `\s`, `\p{L}` and `\p{N}`.
fn other(b: u8) -> bool {
    b.is_ascii() && !b.is_ascii_alphanumeric() && !space(b)
}

impl AsciiSplit {
    /// The end of the match the pattern makes at `at`, or `None` when a byte it depends on
    /// is not ASCII. The branches are tried in the pattern's order, as leftmost-first does.
    pub fn piece(&self, t: &[u8], at: usize) -> Option<usize> {
        let get = |i: usize| t.get(i).copied();
        let c = get(at).filter(u8::is_ascii)?;
        // `(?i:'s|'t|'re|'ve|'m|'ll|'d)`
        if c == b'\'' {
            let next = get(at + 1);
            if next.is_some_and(|b| !b.is_ascii()) {
                return None;
            }
            match next.map(|b| b.to_ascii_lowercase()) {
                Some(b's' | b't' | b'm' | b'd') => return Some(at + 2),
                Some(first @ (b'r' | b'v' | b'l')) => {
                    let want = if first == b'l' { b'l' } else { b'e' };
                    match get(at + 2) {
                        Some(b) if !b.is_ascii() => return None,
                        Some(b) if b.to_ascii_lowercase() == want => return Some(at + 3),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        // A run of letters from `from`: it ends at the first ASCII non-letter or the end.
        let letters = |from: usize| {
            let mut i = from;
            // Eight bytes at a time while they last: most words end within the first eight,
            // and then without the mispredicted branch a byte loop takes at a word's end.
            while let Some(chunk) = t.get(i..).and_then(<[u8]>::first_chunk::<8>) {
                let n = leading_letters(u64::from_le_bytes(*chunk));
                if n < 8 {
                    return t[i + n].is_ascii().then_some(i + n);
                }
                i += 8;
            }
            while let Some(b) = get(i) {
                if b.is_ascii_alphabetic() {
                    i += 1;
                } else if !b.is_ascii() {
                    return None;
                } else {
                    break;
                }
            }
            Some(i)
        };
        // `[^\r\n\p{L}\p{N}]?\p{L}+`
        if c.is_ascii_alphabetic() {
            return letters(at);
        }
        if c != b'\r' && c != b'\n' && !c.is_ascii_digit() {
            match get(at + 1) {
                Some(b) if !b.is_ascii() => return None,
                Some(b) if b.is_ascii_alphabetic() => return letters(at + 1),
                _ => {}
            }
        }
        // `\p{N}` or `\p{N}{1,3}`
        if c.is_ascii_digit() {
            let mut i = at + 1;
            while i - at < self.digits {
                match get(i) {
                    Some(b) if b.is_ascii_digit() => i += 1,
                    Some(b) if !b.is_ascii() => return None,
                    _ => break,
                }
            }
            return Some(i);
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        let run = if other(c) {
            Some(at)
        } else if c == b' ' && get(at + 1).is_some_and(other) {
            Some(at + 1)
        } else {
            None
        };
        if let Some(from) = run {
            let mut i = from + 1;
            loop {
                match get(i) {
                    Some(b) if other(b) => i += 1,
                    Some(b) if !b.is_ascii() => return None,
                    _ => break,
                }
            }
            while matches!(get(i), Some(b'\r' | b'\n')) {
                i += 1;
            }
            return Some(i);
        }
        // Only white space is left. `\s*[\r\n]+` ends after the run's last CR or LF;
        // `\s+(?!\S)` leaves the run's last character to the word after it; `\s+` takes a
        // single character.
        let mut i = at;
        let mut newline = None;
        loop {
            match get(i) {
                Some(b) if space(b) => {
                    if matches!(b, b'\r' | b'\n') {
                        newline = Some(i);
                    }
                    i += 1;
                }
                Some(b) if !b.is_ascii() => return None,
                _ => break,
            }
        }
        Some(match newline {
            Some(n) => n + 1,
            None if i == t.len() || i - at == 1 => i,
            None => i - 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::leading_letters;

    /// Every byte value in every position of a word, against a byte-by-byte count.
    #[test]
    fn leading_letters_counts_as_a_byte_loop_does() {
        let slow = |bytes: &[u8; 8]| bytes.iter().take_while(|b| b.is_ascii_alphabetic()).count();
        let mut next = crate::tokenize::xorshift(0x9E37_79B9_7F4A_7C15);
        for at in 0..8 {
            for b in 0..=255u8 {
                for _ in 0..4 {
                    // Letters before `at`, the byte under test there, anything after.
                    let mut bytes = [0u8; 8];
                    for (i, slot) in bytes.iter_mut().enumerate() {
                        let r = next();
                        *slot = match i.cmp(&at) {
                            std::cmp::Ordering::Less => b"aZmQz"[(r % 5) as usize],
                            std::cmp::Ordering::Equal => b,
                            std::cmp::Ordering::Greater => r as u8,
                        };
                    }
                    assert_eq!(
                        leading_letters(u64::from_le_bytes(bytes)),
                        slow(&bytes),
                        "{bytes:?}"
                    );
                }
            }
        }
    }
}
