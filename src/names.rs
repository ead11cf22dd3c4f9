//! Names read back from a file kvaudit wrote (a corpus partial): reports keep their names
//! (rewrite classes, skip reasons, router names) as `&'static str`, so a name read from a file
//! is interned once for the life of the process. The table grows with the distinct names of
//! the files read, which are bounded in size before they are parsed.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Deserializer, Serializer};

/// A name as reports keep it. serde's derive treats a field written `&'static str` as
/// borrowed from the input (and its structs as readable only from `'static` input); written
/// through this alias, with [`de_name`], it is read from any input.
pub type Name = &'static str;

/// The one `&'static str` for `name`.
pub fn intern(name: &str) -> &'static str {
    static TABLE: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let table = TABLE.get_or_init(Mutex::default);
    let mut table = match table.lock() {
        Ok(t) => t,
        // Nothing is left half-done under the lock: a panic elsewhere does not matter here.
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(&known) = table.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    table.insert(leaked);
    leaked
}

/// `#[serde(deserialize_with)]` for a `&'static str` field.
pub fn de_name<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let s = String::deserialize(d)?;
    Ok(intern(&s))
}

/// `#[serde(deserialize_with)]` for an `Option<&'static str>` field.
pub fn de_opt_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'static str>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(|s| intern(&s)))
}

/// `#[serde(deserialize_with)]` for a map keyed by names.
pub fn de_name_map<'de, D, V>(d: D) -> Result<BTreeMap<&'static str, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    let m = BTreeMap::<String, V>::deserialize(d)?;
    Ok(m.into_iter().map(|(k, v)| (intern(&k), v)).collect())
}

/// `#[serde(with)]` for an `Arc<str>` field (serde's `rc` feature would rebuild every crate
/// that uses serde for this one field).
pub mod arc_str {
    use super::*;

    pub fn serialize<S: Serializer>(s: &Arc<str>, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
        Ok(Arc::from(String::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_per_name() {
        let a = intern(&String::from("reasoning_dropped"));
        let b = intern(&String::from("reasoning_dropped"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(a, "reasoning_dropped");
        assert_ne!(intern("x"), intern("y"));
    }
}
