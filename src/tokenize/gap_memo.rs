//! The ids of short runs between added tokens, remembered by each thread.
//!
//! A chat template writes the same few short runs into every prompt: a role name, the line
//! breaks after a header, a fixed system line. Each is a run between two added tokens and is
//! encoded on its own (see [`super::incremental`]), so its ids depend only on its text and the
//! tokenizer; a thread keeps them, and a repeat costs one hash of a few bytes instead of a pass
//! through the splitter and the word tables.

use std::cell::RefCell;

use super::per_model::PerModel;

/// Runs of up to this many bytes are remembered. Shorter than the least a prompt can take over
/// from a reply, so a remembered run never had ids taken over (see `Direct::take_over`).
const MAX_RUN: usize = 31;
const _: () = assert!(MAX_RUN < super::direct::MIN_TAKE_OVER);
/// Runs remembered per tokenizer and thread before the memo starts over: distinct short runs
/// of hostile text cannot grow it without bound (about 1 MiB: a key of up to 31 bytes, up to
/// 31 ids, and the allocations and table slot around them, per entry).
const MAX_ENTRIES: usize = 4096;
type Runs = rustc_hash::FxHashMap<Box<str>, Box<[u32]>>;

thread_local! {
    static MEMO: RefCell<PerModel<Runs>> = const { RefCell::new(PerModel::new()) };
}

/// `owner`: the tokenizer's key (see [`super::per_model::new_key`]).
fn with_runs<T>(owner: u64, f: impl FnOnce(&mut Runs) -> T) -> T {
    MEMO.with_borrow_mut(|memo| f(memo.entry(owner)))
}

/// The ids of `run` appended to `out`: remembered ones when the run is short and was seen
/// before, else what `encode` appends (and the ids are remembered). `encode` says how many ids
/// it took over from a reply; a remembered run took none.
pub fn encode<E>(
    owner: u64,
    run: &str,
    out: &mut Vec<u32>,
    encode: impl FnOnce(&mut Vec<u32>) -> Result<usize, E>,
) -> Result<usize, E> {
    if run.len() > MAX_RUN {
        return encode(out);
    }
    if with_runs(owner, |runs| {
        runs.get(run)
            .map(|ids| out.extend_from_slice(ids))
            .is_some()
    }) {
        return Ok(0);
    }
    // Encoded without the memo borrowed: an encoder may tokenize through this module again.
    let start = out.len();
    let taken = encode(out)?;
    with_runs(owner, |runs| {
        if runs.len() >= MAX_ENTRIES {
            runs.clear();
        }
        runs.insert(Box::from(run), Box::from(&out[start..]));
    });
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::super::per_model::new_key;
    use super::*;

    #[test]
    fn a_short_run_is_encoded_once_per_owner_and_a_long_one_every_time() {
        let (a, b) = (new_key(), new_key());
        let calls = std::cell::Cell::new(0);
        let run = |owner: u64, text: &str, ids: &[u32]| {
            let mut out = vec![7];
            let taken = encode(owner, text, &mut out, |out| {
                calls.set(calls.get() + 1);
                out.extend_from_slice(ids);
                Ok::<_, ()>(0)
            });
            assert_eq!(taken, Ok(0));
            out
        };
        assert_eq!(run(a, "user", &[1, 2]), [7, 1, 2]);
        // Seen: the memo's ids, whatever the encoder would now say.
        assert_eq!(run(a, "user", &[9]), [7, 1, 2]);
        // Another tokenizer keeps its own.
        assert_eq!(run(b, "user", &[3]), [7, 3]);
        assert_eq!(run(a, "user", &[9]), [7, 1, 2]);
        let long = "x".repeat(MAX_RUN + 1);
        assert_eq!(run(a, &long, &[4]), [7, 4]);
        assert_eq!(run(a, &long, &[5]), [7, 5]);
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn a_failed_encode_is_not_remembered() {
        let owner = new_key();
        let mut out = Vec::new();
        assert_eq!(encode(owner, "x", &mut out, |_| Err("bad")), Err("bad"));
        let r = encode(owner, "x", &mut out, |out| {
            out.push(1);
            Ok::<_, &str>(0)
        });
        assert_eq!((r, out), (Ok(0), vec![1]));
    }

    #[test]
    fn the_memo_starts_over_when_full() {
        let owner = new_key();
        for i in 0..=MAX_ENTRIES {
            let mut out = Vec::new();
            encode(owner, &i.to_string(), &mut out, |out| {
                out.push(i as u32);
                Ok::<_, ()>(0)
            })
            .unwrap();
        }
        let len = with_runs(owner, |runs| runs.len());
        assert_eq!(len, 1);
    }
}
