//! What SGLang 0.5.23 does to a tool's `parameters` before rendering it: database-style type
//! names rewritten to JSON Schema types in place (`normalize_json_schema_types` in
//! function_call/utils.py: the rewritten schema is what the template receives), then the
//! schema checked against the 2020-12 metaschema (`Draft202012Validator.check_schema`; a
//! failure is a 400).
//!
//! The check here covers the metaschema's structural rules for every keyword it defines
//! (types of values, schemas where schemas go, non-empty schema lists, unique string lists,
//! non-negative integers). Not reproduced: the `regex` format of `pattern` (Python's `re`
//! decides there), so a schema whose only fault is a pattern Python cannot compile is rendered
//! here and refused by SGLang.

use serde_json::Value as Json;

const STANDARD: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// Whole-name aliases, after `(…)` is cut and the name lower-cased.
const ALIASES: [(&str, &str); 27] = [
    ("str", "string"),
    ("text", "string"),
    ("varchar", "string"),
    ("char", "string"),
    ("enum", "string"),
    ("uuid", "string"),
    ("date", "string"),
    ("datetime", "string"),
    ("time", "string"),
    ("timestamp", "string"),
    ("binary", "string"),
    ("blob", "string"),
    ("bytea", "string"),
    ("bytes", "string"),
    ("varbinary", "string"),
    ("bool", "boolean"),
    ("bigint", "integer"),
    ("smallint", "integer"),
    ("tinyint", "integer"),
    ("double", "number"),
    ("decimal", "number"),
    ("real", "number"),
    ("numeric", "number"),
    ("arr", "array"),
    ("tuple", "array"),
    ("set", "array"),
    ("map", "object"),
];

/// Prefixes that name a type when the rest starts with a digit, `[`, `<`, `(`, space or tab
/// (`int32`, `list[str]`), so `int` does not take `internal`.
const PREFIXES: [(&[&str], &str); 4] = [
    (&["int", "uint", "long", "short", "unsigned"], "integer"),
    (&["num", "float"], "number"),
    (&["list"], "array"),
    (&["dict"], "object"),
];

fn normalize_name(raw: &str) -> Option<&'static str> {
    if let Some(t) = STANDARD.iter().find(|t| **t == raw) {
        return Some(t);
    }
    let base = raw.split('(').next().unwrap_or(raw).trim().to_lowercase();
    if let Some(t) = STANDARD.iter().find(|t| **t == base) {
        return Some(t);
    }
    if let Some((_, t)) = ALIASES.iter().find(|(a, _)| *a == base) {
        return Some(t);
    }
    PREFIXES.iter().find_map(|(prefixes, target)| {
        prefixes
            .iter()
            .any(|p| {
                base == *p
                    || base.strip_prefix(p).is_some_and(|rest| {
                        rest.starts_with(|c: char| c.is_ascii_digit() || "[<( \t".contains(c))
                    })
            })
            .then_some(*target)
    })
}

fn normalize_type(t: &mut Json) {
    match t {
        Json::String(raw) => {
            if let Some(n) = normalize_name(raw) {
                *raw = n.to_string();
            }
        }
        Json::Array(items) => {
            let mut out: Vec<Json> = Vec::with_capacity(items.len());
            for item in items.drain(..) {
                let item = match &item {
                    Json::String(raw) => normalize_name(raw).map_or(item.clone(), Json::from),
                    _ => item,
                };
                if !out.contains(&item) {
                    out.push(item);
                }
            }
            *items = out;
        }
        _ => {}
    }
}

/// Keywords whose value is a map of schemas, one schema, or a list of schemas.
const SCHEMA_MAPS: [&str; 6] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];
const SCHEMA_LISTS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
const SCHEMAS: [&str; 11] = [
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];

/// `normalize_json_schema_types`: rewrite `type` values in place, walking where SGLang walks.
pub fn normalize(schema: &mut Json) {
    match schema {
        Json::Array(items) => items.iter_mut().for_each(normalize),
        Json::Object(map) => {
            if let Some(t) = map.get_mut("type") {
                normalize_type(t);
            }
            // SGLang walks `dependencies` only through the metaschema check, not here.
            for key in &SCHEMA_MAPS[..5] {
                if let Some(Json::Object(nested)) = map.get_mut(*key) {
                    nested.values_mut().for_each(normalize);
                }
            }
            for key in SCHEMA_LISTS {
                if let Some(Json::Array(nested)) = map.get_mut(key) {
                    nested.iter_mut().for_each(normalize);
                }
            }
            for key in &SCHEMAS[..10] {
                if let Some(nested) = map.get_mut(*key) {
                    normalize(nested);
                }
            }
        }
        _ => {}
    }
}

/// An integer as Python's jsonschema sees one: a float with no fraction counts.
fn is_integer(v: &Json) -> bool {
    v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn non_negative_integer(v: &Json) -> bool {
    is_integer(v) && v.as_f64().is_some_and(|f| f >= 0.0)
}

/// A list of distinct strings (the metaschema's `stringArray`).
fn string_array(v: &Json) -> bool {
    v.as_array().is_some_and(|a| {
        a.iter().all(Json::is_string) && a.iter().enumerate().all(|(i, x)| !a[..i].contains(x))
    })
}

fn simple_type(v: &Json) -> bool {
    v.as_str().is_some_and(|t| STANDARD.contains(&t))
}

/// The first metaschema rule `schema` breaks, as `path: why`.
pub fn check(schema: &Json, path: &str) -> Result<(), String> {
    let fail = |key: &str, why: &str| Err(format!("{path}/{key}: {why}"));
    let map = match schema {
        Json::Bool(_) => return Ok(()),
        Json::Object(map) => map,
        _ => return Err(format!("{path}: a schema is an object or a boolean")),
    };
    for (key, v) in map {
        let sub = |p: &str| format!("{path}/{key}{p}");
        match key.as_str() {
            "type" => {
                let ok = simple_type(v)
                    || v.as_array().is_some_and(|a| {
                        !a.is_empty()
                            && a.iter().all(simple_type)
                            && a.iter().enumerate().all(|(i, x)| !a[..i].contains(x))
                    });
                if !ok {
                    return fail(key, "not a JSON Schema type");
                }
            }
            "enum" | "examples" if !v.is_array() => return fail(key, "not a list"),
            "required" if !string_array(v) => return fail(key, "not a list of distinct strings"),
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties" | "minContains" | "maxContains"
                if !non_negative_integer(v) =>
            {
                return fail(key, "not a non-negative integer");
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" if !v.is_number() => {
                return fail(key, "not a number");
            }
            "multipleOf" if !v.as_f64().is_some_and(|f| f > 0.0) => {
                return fail(key, "not a number above 0");
            }
            "uniqueItems" | "readOnly" | "writeOnly" | "deprecated" if !v.is_boolean() => {
                return fail(key, "not a boolean");
            }
            "title" | "description" | "pattern" | "format" | "contentMediaType"
            | "contentEncoding" | "$id" | "$schema" | "$ref" | "$anchor" | "$dynamicRef"
            | "$dynamicAnchor" | "$comment" | "$recursiveRef" | "$recursiveAnchor"
                if !v.is_string() =>
            {
                return fail(key, "not a string");
            }
            // The metaschema's anchorString: ^[A-Za-z_][-A-Za-z0-9._]*$
            "$anchor" | "$dynamicAnchor" | "$recursiveAnchor"
                if !v.as_str().is_some_and(|a| {
                    a.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                        && a.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
                }) =>
            {
                return fail(key, "not an anchor name");
            }
            "dependentRequired" => match v.as_object() {
                Some(m) if m.values().all(string_array) => {}
                _ => return fail(key, "not a map of lists of distinct strings"),
            },
            "$vocabulary" => match v.as_object() {
                Some(m) if m.values().all(Json::is_boolean) => {}
                _ => return fail(key, "not a map of booleans"),
            },
            k if SCHEMA_MAPS.contains(&k) => {
                let Some(m) = v.as_object() else {
                    return fail(key, "not a map of schemas");
                };
                for (name, s) in m {
                    // `dependencies` also takes a list of property names.
                    if k == "dependencies" && string_array(s) {
                        continue;
                    }
                    check(s, &sub(&format!("/{name}")))?;
                }
            }
            k if SCHEMA_LISTS.contains(&k) => match v.as_array() {
                Some(a) if !a.is_empty() => {
                    for (i, s) in a.iter().enumerate() {
                        check(s, &sub(&format!("/{i}")))?;
                    }
                }
                _ => return fail(key, "not a non-empty list of schemas"),
            },
            k if SCHEMAS.contains(&k) => check(v, &sub(""))?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn database_type_names_become_json_schema_types() {
        let mut s = json!({"type": "object", "properties": {
            "a": {"type": "int"}, "b": {"type": "VARCHAR(255)"}, "c": {"type": "list[str]"},
            "d": {"type": "internal"}, "e": {"type": ["int", "integer", "null"]},
            "f": {"items": {"type": "float64"}}, "g": {"anyOf": [{"type": "bool"}]},
            "h": {"type": "uint8"}, "i": {"type": "dict[str, int]"}
        }});
        normalize(&mut s);
        assert_eq!(
            s,
            json!({"type": "object", "properties": {
                "a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "array"},
                "d": {"type": "internal"}, "e": {"type": ["integer", "null"]},
                "f": {"items": {"type": "number"}}, "g": {"anyOf": [{"type": "boolean"}]},
                "h": {"type": "integer"}, "i": {"type": "object"}
            }})
        );
    }

    #[test]
    fn the_metaschema_refuses_what_jsonschema_refuses() {
        let ok = [
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            json!(true),
            json!({"type": ["string", "null"], "minLength": 1.0}),
            json!({"dependencies": {"a": ["b"], "c": {"type": "string"}}}),
        ];
        for s in ok {
            assert_eq!(check(&s, ""), Ok(()), "{s}");
        }
        let bad = [
            (json!({"type": "foo"}), "/type: not a JSON Schema type"),
            (json!([1]), ": a schema is an object or a boolean"),
            (
                json!({"required": "a"}),
                "/required: not a list of distinct strings",
            ),
            (
                json!({"required": ["a", "a"]}),
                "/required: not a list of distinct strings",
            ),
            (json!({"type": []}), "/type: not a JSON Schema type"),
            (
                json!({"anyOf": []}),
                "/anyOf: not a non-empty list of schemas",
            ),
            (
                json!({"properties": {"a": {"type": "int"}}}),
                "/properties/a/type: not a JSON Schema type",
            ),
            (
                json!({"minLength": -1}),
                "/minLength: not a non-negative integer",
            ),
            (json!({"description": 3}), "/description: not a string"),
        ];
        for (s, why) in bad {
            assert_eq!(check(&s, ""), Err(why.to_string()), "{s}");
        }
    }
}
