//! llm-d's block keys: CBOR-FNV (default) and XXH64, chained from a per-model root.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlgo {
    CborFnv,
    Xxh64,
}

impl HashAlgo {
    pub fn name(self) -> &'static str {
        match self {
            HashAlgo::CborFnv => "cbor-fnv",
            HashAlgo::Xxh64 => "xxh64",
        }
    }
}

struct Fnv(u64);

impl Fnv {
    #[inline]
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }

    /// A CBOR head (major type + argument) in the shortest form, as canonical CBOR requires.
    #[inline]
    fn head(&mut self, major: u8, v: u64) {
        let m = major << 5;
        if v < 24 {
            self.bytes(&[m | v as u8]);
        } else if v <= 0xff {
            self.bytes(&[m | 24, v as u8]);
        } else if v <= 0xffff {
            self.bytes(&[m | 25]);
            self.bytes(&(v as u16).to_be_bytes());
        } else if v <= 0xffff_ffff {
            self.bytes(&[m | 26]);
            self.bytes(&(v as u32).to_be_bytes());
        } else {
            self.bytes(&[m | 27]);
            self.bytes(&v.to_be_bytes());
        }
    }

    fn text(&mut self, s: &str) {
        self.head(3, s.len() as u64);
        self.bytes(s.as_bytes());
    }
}

/// Computes llm-d request keys for one configuration.
#[derive(Debug, Clone)]
pub struct KeyHasher {
    algo: HashAlgo,
    init: u64,
}

/// What a block's `extra` element is.
#[derive(Debug, Clone, Copy)]
pub enum Extra<'a> {
    None,
    /// The model name (only for the chain root).
    Model(&'a str),
    /// Multimodal identifiers / salt / taint strings of one block.
    Features(&'a [String]),
}

impl KeyHasher {
    pub fn new(algo: HashAlgo, seed: &str) -> KeyHasher {
        let init = match algo {
            HashAlgo::CborFnv => {
                let mut h = Fnv(FNV_OFFSET);
                h.bytes(seed.as_bytes());
                h.0
            }
            HashAlgo::Xxh64 => xxhash_rust::xxh64::xxh64(seed.as_bytes(), 0),
        };
        KeyHasher { algo, init }
    }

    pub fn algo(&self) -> HashAlgo {
        self.algo
    }

    pub fn init_hash(&self) -> u64 {
        self.init
    }

    /// The chain root for a model: `H(init, nil, model)`.
    pub fn root(&self, model: &str) -> u64 {
        self.hash(self.init, None, Extra::Model(model))
    }

    /// One key: `H(parent, tokens, extra)`; `tokens: None` is CBOR null (the root).
    pub fn hash(&self, parent: u64, tokens: Option<&[u32]>, extra: Extra) -> u64 {
        match self.algo {
            HashAlgo::CborFnv => {
                let mut h = Fnv(FNV_OFFSET);
                h.bytes(&[0x83]);
                h.head(0, parent);
                match tokens {
                    None => h.bytes(&[0xf6]),
                    Some(t) => {
                        h.head(4, t.len() as u64);
                        for &x in t {
                            h.head(0, x as u64);
                        }
                    }
                }
                match extra {
                    Extra::None => h.bytes(&[0xf6]),
                    Extra::Model(m) => h.text(m),
                    Extra::Features(list) => {
                        h.head(4, list.len() as u64);
                        for s in list {
                            // Go's struct MMHash{Hash string} encodes as {"Hash": s}.
                            h.bytes(&[0xa1, 0x64, b'H', b'a', b's', b'h']);
                            h.text(s);
                        }
                    }
                }
                h.0
            }
            HashAlgo::Xxh64 => {
                let mut x = xxhash_rust::xxh64::Xxh64::new(0);
                x.update(&parent.to_le_bytes());
                for &t in tokens.unwrap_or(&[]) {
                    x.update(&t.to_le_bytes());
                }
                let mut one = |s: &str| {
                    x.update(&(s.len() as u64).to_le_bytes());
                    x.update(s.as_bytes());
                };
                match extra {
                    Extra::None => {}
                    Extra::Model(m) => one(m),
                    Extra::Features(list) => list.iter().for_each(|s| one(s)),
                }
                x.digest()
            }
        }
    }

    /// Keys of every full `block_size` chunk of `tokens`, chained from `parent`; the tail
    /// shorter than a block is dropped, as llm-d does.
    pub fn keys(
        &self,
        parent: u64,
        tokens: &[u32],
        block_size: usize,
        features: Option<&[Option<Vec<String>>]>,
    ) -> Vec<u64> {
        let mut out = Vec::with_capacity(tokens.len() / block_size);
        self.keys_into(parent, tokens, block_size, features, &mut out);
        out
    }

    /// [`keys`](Self::keys), appended to `out`.
    pub fn keys_into(
        &self,
        parent: u64,
        tokens: &[u32],
        block_size: usize,
        features: Option<&[Option<Vec<String>>]>,
        out: &mut Vec<u64>,
    ) {
        out.extend(self.chain(parent, tokens, block_size, features));
    }

    /// [`keys`](Self::keys), each hashed only when it is asked for (a lookup that stops at
    /// its first miss hashes no further).
    pub fn chain<'a>(
        &'a self,
        parent: u64,
        tokens: &'a [u32],
        block_size: usize,
        features: Option<&'a [Option<Vec<String>>]>,
    ) -> impl Iterator<Item = u64> + 'a {
        let mut prev = parent;
        tokens
            .chunks_exact(block_size)
            .enumerate()
            .map(move |(i, chunk)| {
                let extra = match features.and_then(|f| f.get(i)).and_then(|f| f.as_deref()) {
                    Some(list) => Extra::Features(list),
                    None => Extra::None,
                };
                prev = self.hash(prev, Some(chunk), extra);
                prev
            })
    }

    /// [`chain`](Self::chain) without features, each key taken from `memo` when there is one
    /// and it has the key.
    pub fn chain_memo<'a>(
        &'a self,
        mut memo: Option<&'a mut KeyMemo>,
        parent: u64,
        tokens: &'a [u32],
        block_size: usize,
    ) -> impl Iterator<Item = u64> + 'a {
        let mut prev = parent;
        tokens.chunks_exact(block_size).map(move |chunk| {
            prev = match memo.as_deref_mut() {
                Some(memo) => memo.key(self, prev, chunk),
                None => self.hash(prev, Some(chunk), Extra::None),
            };
            prev
        })
    }
}

/// Keys already computed, by parent and block: the prompts of one conversation repeat each
/// other's blocks, and a CBOR-FNV key is a pass over every token's encoding, where a repeat
/// costs one probe and a compare of the block's tokens. The key of a block is a function of its
/// parent and its tokens alone (no extra features are remembered), so a hit is the key itself.
#[derive(Default)]
pub struct KeyMemo {
    /// Parent → where its last block's tokens sit in `tokens`, their count, and its key: one
    /// block per parent (a prompt that forks from another replaces it).
    by_parent: rustc_hash::FxHashMap<u64, (u32, u32, u64)>,
    tokens: Vec<u32>,
}

/// Tokens the memo holds at most (4 MiB) before it starts over: one conversation's blocks,
/// however long, cannot grow it without bound.
const MEMO_TOKENS: usize = 1 << 20;

impl KeyMemo {
    /// `hasher.hash(parent, Some(block), Extra::None)`, from the memo when it has it.
    pub fn key(&mut self, hasher: &KeyHasher, parent: u64, block: &[u32]) -> u64 {
        if let Some(&(at, len, key)) = self.by_parent.get(&parent)
            && len as usize == block.len()
            && self.tokens[at as usize..][..len as usize] == *block
        {
            return key;
        }
        let key = hasher.hash(parent, Some(block), Extra::None);
        // A block past the bound is not kept (and does not clear what is).
        if block.len() <= MEMO_TOKENS {
            if self.tokens.len() + block.len() > MEMO_TOKENS {
                self.tokens.clear();
                self.by_parent.clear();
            }
            // Both fit in u32: the arena holds at most MEMO_TOKENS tokens.
            let at = self.tokens.len() as u32;
            self.tokens.extend_from_slice(block);
            self.by_parent.insert(parent, (at, block.len() as u32, key));
        }
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(a: u32, b: u32) -> Vec<u32> {
        (a..=b).collect()
    }

    #[test]
    fn memo_keys_are_the_hashed_keys() {
        let h = KeyHasher::new(HashAlgo::CborFnv, "");
        let mut memo = KeyMemo::default();
        let mut next = crate::tokenize::xorshift(0x9E37_79B9_7F4A_7C15);
        // Few parents and few distinct blocks, so most lookups are repeats, some after a
        // parent whose last block was another one or of another length.
        for _ in 0..5_000 {
            let parent = next() % 7;
            let len = [4usize, 16, 64][(next() % 3) as usize];
            let seed = (next() % 3) as u32;
            let block: Vec<u32> = (0..len as u32).map(|i| i * 31 + seed).collect();
            let want = h.hash(parent, Some(&block), Extra::None);
            assert_eq!(memo.key(&h, parent, &block), want);
        }
        // A block shorter than the one stored after the same parent, and equal to its start.
        let long: Vec<u32> = (0..16).collect();
        memo.key(&h, 99, &long);
        assert_eq!(
            memo.key(&h, 99, &long[..4]),
            h.hash(99, Some(&long[..4]), Extra::None)
        );
        let chained: Vec<u64> = h.chain_memo(Some(&mut memo), 5, &long, 4).collect();
        assert_eq!(chained, h.keys(5, &long, 4, None));
        let unmemoized: Vec<u64> = h.chain_memo(None, 5, &long, 4).collect();
        assert_eq!(unmemoized, chained);
    }

    #[test]
    fn memo_starts_over_when_full() {
        let h = KeyHasher::new(HashAlgo::CborFnv, "");
        let mut memo = KeyMemo::default();
        let block = vec![1u32; 1 << 16];
        for parent in 0..20u64 {
            assert_eq!(
                memo.key(&h, parent, &block),
                h.hash(parent, Some(&block), Extra::None)
            );
            assert!(memo.tokens.len() <= MEMO_TOKENS);
        }
        assert!(memo.by_parent.len() < 20);
    }

    #[test]
    fn llm_d_e2e_vector() {
        // llm-d-kv-cache tests/e2e/uds_tokenizer: BS 4, seed "", granite 3.1 8b instruct.
        let h = KeyHasher::new(HashAlgo::CborFnv, "");
        let root = h.root("ibm-granite/granite-3.1-8b-instruct");
        let keys = h.keys(root, &[8197, 438, 322, 18926, 432, 45600, 49], 4, None);
        assert_eq!(keys, vec![1334984470577408192]);
    }

    #[test]
    fn cbor_fnv_vectors() {
        let h = KeyHasher::new(HashAlgo::CborFnv, "");
        assert_eq!(h.init_hash(), 14695981039346656037);
        let root = h.root("test-model");
        assert_eq!(root, 17515353698173365712);
        assert_eq!(
            h.keys(root, &seq(1, 16), 16, None),
            vec![9540012594951042066]
        );
        assert_eq!(
            h.keys(root, &seq(1, 64), 16, None),
            vec![
                9540012594951042066,
                16921089685996993662,
                1342399872045281493,
                14412806440506676804
            ]
        );
        assert_eq!(
            h.keys(root, &seq(1, 128), 64, None),
            vec![16801337067204168178, 17609662910106352825]
        );
        let seeded = KeyHasher::new(HashAlgo::CborFnv, "42");
        assert_eq!(
            seeded.keys(seeded.root("test-model"), &seq(1, 16), 16, None),
            vec![3239622172847516705]
        );
        let f = vec![Some(vec!["abc".to_string()])];
        assert_eq!(
            h.keys(root, &seq(1, 16), 16, Some(&f)),
            vec![12050696698905974389]
        );
        assert_eq!(
            h.keys(16801337067204168178, &seq(81, 144), 64, None),
            vec![12822320300211671609]
        );
    }

    #[test]
    fn xxh64_vectors() {
        let h = KeyHasher::new(HashAlgo::Xxh64, "");
        assert_eq!(h.init_hash(), 17241709254077376921);
        let root = h.root("test-model");
        assert_eq!(
            h.keys(root, &seq(1, 32), 16, None),
            vec![13553460584553255540, 9887990258693334188]
        );
    }

    #[test]
    fn cbor_bytes_match_the_reference_example() {
        // [123, [1,2,300], null] -> 83 18 7b 83 01 02 19 01 2c f6
        let mut h = Fnv(FNV_OFFSET);
        h.bytes(&[0x83, 0x18, 0x7b, 0x83, 0x01, 0x02, 0x19, 0x01, 0x2c, 0xf6]);
        let k = KeyHasher {
            algo: HashAlgo::CborFnv,
            init: 0,
        };
        assert_eq!(k.hash(123, Some(&[1, 2, 300]), Extra::None), h.0);
    }
}
