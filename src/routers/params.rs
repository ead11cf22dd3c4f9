//! The `key=value` settings of one `--router NAME:...` value, read by the router they belong to.

/// `key=value` pairs, each taken once by the router that reads it; what is left is unknown.
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    pub(crate) fn parse(name: &str, text: &str) -> Result<Params, String> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{name}: expected key=value, got {part:?}"))?;
            // Both spellings users copy from the routers' own configs.
            let k = k.trim().replace('-', "_");
            let k = match k.as_str() {
                "blockSizeTokens" | "blocksize" | "kv_block_size" => "block_size".to_string(),
                "nonCachedTokens" => "non_cached_tokens".to_string(),
                "promptTokens" => "prompt_tokens".to_string(),
                _ => k,
            };
            if pairs.iter().any(|(have, _)| *have == k) {
                return Err(format!("{name}: {k} given twice"));
            }
            pairs.push((k, v.trim().to_string()));
        }
        Ok(Params { pairs })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let at = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(at).1)
    }

    pub(crate) fn word(&mut self, key: &str) -> Result<Option<String>, String> {
        Ok(self.take(key))
    }

    pub(crate) fn number(&mut self, key: &str) -> Result<Option<usize>, String> {
        self.take(key)
            .map(|v| {
                v.parse::<usize>()
                    .map_err(|_| format!("{key}={v}: expected a non-negative integer"))
            })
            .transpose()
    }

    pub(crate) fn block_size(&mut self) -> Result<Option<usize>, String> {
        self.number("block_size")?
            .map(|b| crate::align::check_block_size("block_size", b))
            .transpose()
            .map_err(|e| e.to_string())
    }

    /// A count setting within `range`, named with its range when it is not.
    pub(crate) fn bounded(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<usize>,
    ) -> Result<Option<usize>, String> {
        match self.number(key)? {
            Some(n) if !range.contains(&n) => Err(format!(
                "{key}={n}: expected a whole number from {} to {}",
                range.start(),
                range.end()
            )),
            n => Ok(n),
        }
    }

    pub(crate) fn fraction(&mut self, key: &str) -> Result<Option<f64>, String> {
        self.take(key)
            .map(|v| match v.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
                _ => Err(format!("{key}={v}: expected a number from 0 to 1")),
            })
            .transpose()
    }

    pub(crate) fn flag(&mut self, key: &str) -> Result<Option<bool>, String> {
        self.take(key)
            .map(|v| match v.as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(format!("{key}={v}: expected true or false")),
            })
            .transpose()
    }

    pub(crate) fn finish(self, name: &str) -> Result<(), String> {
        match self.pairs.first() {
            None => Ok(()),
            Some((k, _)) => Err(format!("{name} has no setting {k:?}")),
        }
    }
}
