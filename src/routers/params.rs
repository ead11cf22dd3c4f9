//! The `key=value` settings of one `--router NAME:...` value, read by the router they belong to.

/// Why a `--router NAME:key=value,...` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouterSpecError {
    /// A name `--router` does not take (the message lists those it does).
    #[error("{0}")]
    UnknownRouter(String),
    /// A part that is not `key=value`, or a key given twice.
    #[error("{0}")]
    Syntax(String),
    /// A key the router does not read.
    #[error("{router} has no setting {key:?}")]
    UnknownSetting { router: String, key: String },
    /// A value of the wrong kind, or out of its range.
    #[error("{key}={value}: expected {expected}")]
    Value {
        key: String,
        value: String,
        expected: String,
    },
    /// A value or a combination of settings refused for a reason of its own (a block size
    /// out of range, a setting without the one it belongs to).
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    BlockSize(#[from] crate::align::BlockSizeError),
}

impl RouterSpecError {
    pub(crate) fn value(key: &str, value: &str, expected: &str) -> RouterSpecError {
        RouterSpecError::Value {
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        }
    }
}

/// `key=value` pairs, each taken once by the router that reads it; what is left is unknown.
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    pub(crate) fn parse(name: &str, text: &str) -> Result<Params, RouterSpecError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                RouterSpecError::Syntax(format!("{name}: expected key=value, got {part:?}"))
            })?;
            // Both spellings users copy from the routers' own configs.
            let k = k.trim().replace('-', "_");
            let k = match k.as_str() {
                "blockSizeTokens" | "blocksize" | "kv_block_size" => "block_size".to_string(),
                "nonCachedTokens" => "non_cached_tokens".to_string(),
                "promptTokens" => "prompt_tokens".to_string(),
                _ => k,
            };
            if pairs.iter().any(|(have, _)| *have == k) {
                return Err(RouterSpecError::Syntax(format!("{name}: {k} given twice")));
            }
            pairs.push((k, v.trim().to_string()));
        }
        Ok(Params { pairs })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let at = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(at).1)
    }

    pub(crate) fn word(&mut self, key: &str) -> Result<Option<String>, RouterSpecError> {
        Ok(self.take(key))
    }

    pub(crate) fn number(&mut self, key: &str) -> Result<Option<usize>, RouterSpecError> {
        self.take(key)
            .map(|v| {
                v.parse::<usize>()
                    .map_err(|_| RouterSpecError::value(key, &v, "a non-negative integer"))
            })
            .transpose()
    }

    pub(crate) fn block_size(&mut self) -> Result<Option<usize>, RouterSpecError> {
        self.number("block_size")?
            .map(|b| crate::align::check_block_size("block_size", b).map_err(RouterSpecError::from))
            .transpose()
    }

    /// A count setting within `range`, named with its range when it is not.
    pub(crate) fn bounded(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<usize>,
    ) -> Result<Option<usize>, RouterSpecError> {
        match self.number(key)? {
            Some(n) if !range.contains(&n) => Err(RouterSpecError::value(
                key,
                &n.to_string(),
                &format!("a whole number from {} to {}", range.start(), range.end()),
            )),
            n => Ok(n),
        }
    }

    pub(crate) fn fraction(&mut self, key: &str) -> Result<Option<f64>, RouterSpecError> {
        self.take(key)
            .map(|v| match v.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
                _ => Err(RouterSpecError::value(key, &v, "a number from 0 to 1")),
            })
            .transpose()
    }

    pub(crate) fn flag(&mut self, key: &str) -> Result<Option<bool>, RouterSpecError> {
        self.take(key)
            .map(|v| match v.as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(RouterSpecError::value(key, &v, "true or false")),
            })
            .transpose()
    }

    pub(crate) fn finish(self, name: &str) -> Result<(), RouterSpecError> {
        match self.pairs.first() {
            None => Ok(()),
            Some((k, _)) => Err(RouterSpecError::UnknownSetting {
                router: name.to_string(),
                key: k.clone(),
            }),
        }
    }
}
