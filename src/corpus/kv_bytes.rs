//! KV-cache bytes per token: given by the user, or derived from the model's config.json.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KvBytes {
    pub bytes_per_token: u64,
    /// How the figure was found, in words (printed beside it).
    pub derivation: String,
}

/// Why config.json gave no KV bytes per token. The underlying errors are part of the message,
/// not sources: the message is printed alone, inside a warning.
#[derive(Debug, thiserror::Error)]
pub enum KvBytesError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{} is not JSON: {error}", path.display())]
    NotJson {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error("{}: {error}", path.display())]
    Config { path: PathBuf, error: ConfigError },
}

/// What in a model's config keeps the figure from being derived.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no integer `{0}`")]
    Missing(&'static str),
    #[error("unknown dtype {0:?}")]
    UnknownDtype(String),
    /// A product that overflows or is zero: no real model's cache.
    #[error("{0}")]
    OutOfRange(&'static str),
}

/// config.json is a few kilobytes; anything much larger is not one.
const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// From config.json: layers x KV heads x head dim x 2 (K and V) x dtype bytes, or for
/// multi-head latent attention (DeepSeek V2/V3 style, `kv_lora_rank`) layers x (kv_lora_rank +
/// qk_rope_head_dim) x dtype bytes — the latent vector and the rotary key are what is cached.
/// `None` when the file is absent or lacks the fields.
pub fn from_config(path: &Path) -> Option<Result<KvBytes, KvBytesError>> {
    if !path.is_file() {
        return None;
    }
    let text = match crate::input::read_text(path, MAX_CONFIG_BYTES) {
        Ok(t) => t,
        Err(error) => {
            return Some(Err(KvBytesError::Read {
                path: path.to_path_buf(),
                error,
            }));
        }
    };
    let json: Json = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(error) => {
            return Some(Err(KvBytesError::NotJson {
                path: path.to_path_buf(),
                error,
            }));
        }
    };
    Some(derive(&json).map_err(|error| KvBytesError::Config {
        path: path.to_path_buf(),
        error,
    }))
}

pub fn derive(config: &Json) -> Result<KvBytes, ConfigError> {
    // Multimodal configs keep the language model's numbers under text_config.
    let c = match config.get("text_config") {
        Some(t) if t.get("num_hidden_layers").is_some() => t,
        _ => config,
    };
    let int = |name: &str| c.get(name).and_then(Json::as_u64);
    let need = |name: &'static str| int(name).ok_or(ConfigError::Missing(name));
    let layers = need("num_hidden_layers")?;
    let dtype = c
        .get("torch_dtype")
        .or_else(|| c.get("dtype"))
        .or_else(|| config.get("torch_dtype"))
        .and_then(Json::as_str)
        .unwrap_or("bfloat16");
    let dtype_bytes: u64 = match dtype {
        "float32" => 4,
        "bfloat16" | "float16" => 2,
        d if d.starts_with("float8") => 1,
        other => return Err(ConfigError::UnknownDtype(other.to_string())),
    };
    let (per_layer, how) = if let Some(rank) = int("kv_lora_rank") {
        let rope = int("qk_rope_head_dim").unwrap_or(0);
        (
            rank.checked_add(rope)
                .ok_or(ConfigError::OutOfRange("kv_lora_rank overflows"))?,
            format!("MLA: {layers} layers x (kv_lora_rank {rank} + qk_rope_head_dim {rope})"),
        )
    } else {
        let heads = need("num_attention_heads")?;
        let kv_heads = int("num_key_value_heads").unwrap_or(heads);
        let head_dim = match int("head_dim") {
            Some(d) => d,
            None => need("hidden_size")? / heads.max(1),
        };
        (
            kv_heads
                .checked_mul(head_dim)
                .and_then(|x| x.checked_mul(2))
                .ok_or(ConfigError::OutOfRange("KV size overflows"))?,
            format!("{layers} layers x {kv_heads} KV heads x head_dim {head_dim} x 2 (K, V)"),
        )
    };
    let bytes = layers
        .checked_mul(per_layer)
        .and_then(|x| x.checked_mul(dtype_bytes))
        .filter(|&b| b > 0)
        .ok_or(ConfigError::OutOfRange(
            "KV bytes per token overflow or are zero",
        ))?;
    Ok(KvBytes {
        bytes_per_token: bytes,
        derivation: format!("{how} x {dtype_bytes} bytes ({dtype}) from config.json"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn llama_3_1_8b() {
        // 32 layers, 8 KV heads, head dim 4096/32 = 128, bf16: 32*8*128*2*2 = 131072.
        let c = json!({"num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "bfloat16"});
        assert_eq!(derive(&c).unwrap().bytes_per_token, 131_072);
    }

    #[test]
    fn qwen3_8b_has_its_own_head_dim() {
        // 36 layers, 8 KV heads, head_dim 128: 147456.
        let c = json!({"num_hidden_layers": 36, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096,
            "torch_dtype": "bfloat16"});
        assert_eq!(derive(&c).unwrap().bytes_per_token, 147_456);
    }

    #[test]
    fn deepseek_v3_latent() {
        // 61 layers x (512 + 64) x 2 bytes = 70272.
        let c = json!({"num_hidden_layers": 61, "num_attention_heads": 128,
            "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
            "torch_dtype": "bfloat16"});
        let k = derive(&c).unwrap();
        assert_eq!(k.bytes_per_token, 70_272);
        assert!(k.derivation.starts_with("MLA"));
    }

    #[test]
    fn bad_configs_say_why() {
        assert!(
            derive(&json!({}))
                .unwrap_err()
                .to_string()
                .contains("num_hidden_layers")
        );
        let huge = json!({"num_hidden_layers": u64::MAX, "num_attention_heads": 2,
            "hidden_size": 4});
        assert!(derive(&huge).is_err());
        let odd = json!({"num_hidden_layers": 1, "num_attention_heads": 1, "hidden_size": 2,
            "torch_dtype": "int3"});
        assert!(derive(&odd).unwrap_err().to_string().contains("int3"));
    }
}
