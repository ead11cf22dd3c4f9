//! The words the direct encoder hands to a BPE model (the crate's or the prepared one): what
//! turns one into ids, and the byte-level alphabet it is written in. A file of its own so that
//! both sides can use it without importing each other.

use super::TokenizeError;

/// What turns one pre-tokenized word into ids (the BPE model).
pub trait WordIds {
    /// The model's ids for one piece of raw text, appended to `out`: the ids of its
    /// byte-level form (which `scratch` may be used to build).
    fn piece_ids(
        &self,
        piece: &str,
        scratch: &mut String,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizeError>;

    /// `f` with a [`piece_ids`](Self::piece_ids) into `out` for many pieces, whose ids are
    /// all in `out`, in order, when this returns Ok (not necessarily before; on an error,
    /// `out` holds the ids of the pieces before the failing one). May hold state (a
    /// thread's word cache) for as long as `f` runs.
    fn with_pieces(
        &self,
        out: &mut Vec<u32>,
        f: &mut dyn FnMut(&mut PieceIds) -> Result<(), TokenizeError>,
    ) -> Result<(), TokenizeError> {
        let mut scratch = String::new();
        f(&mut |piece| self.piece_ids(piece, &mut scratch, out))
    }
}

/// Hands over one piece of raw text.
pub type PieceIds<'a> = dyn FnMut(&str) -> Result<(), TokenizeError> + 'a;

/// `piece`'s bytes in the byte-level alphabet, written over `scratch`.
pub(super) fn byte_level<'s>(piece: &[u8], scratch: &'s mut String) -> &'s str {
    scratch.clear();
    scratch.extend(piece.iter().map(|&b| BYTE_CHARS[b as usize]));
    scratch
}

impl WordIds for tokenizers::ModelWrapper {
    fn piece_ids(
        &self,
        piece: &str,
        scratch: &mut String,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizeError> {
        let word = byte_level(piece.as_bytes(), scratch);
        let tokens = tokenizers::Model::tokenize(self, word).map_err(TokenizeError::encode)?;
        out.extend(tokens.iter().map(|t| t.id));
        Ok(())
    }
}

/// GPT-2's byte-to-char table: printable Latin-1 bytes stand for themselves, the other 68
/// bytes for U+0100 upward, in byte order.
const fn byte_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    let mut b = 0usize;
    while b < 256 {
        let printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        let code = if printable {
            b as u32
        } else {
            let c = next;
            next += 1;
            c
        };
        table[b] = match char::from_u32(code) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    table
}

static BYTE_CHARS: [char; 256] = byte_chars();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_table_is_gpt2s() {
        assert_eq!(BYTE_CHARS[b'!' as usize], '!');
        assert_eq!(BYTE_CHARS[b' ' as usize], 'Ġ');
        assert_eq!(BYTE_CHARS[b'\n' as usize], 'Ċ');
        assert_eq!(BYTE_CHARS[0], 'Ā');
        assert_eq!(BYTE_CHARS[0xAD], 'Ń');
        assert_eq!(BYTE_CHARS[0xFF], 'ÿ');
        let mut all: Vec<char> = BYTE_CHARS.to_vec();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 256);
    }
}
