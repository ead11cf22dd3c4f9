//! What SGLang 0.5.23 does to a tool's `parameters` before rendering it: database-style type
//! names rewritten to JSON Schema types in place (`normalize_json_schema_types` in
//! function_call/utils.py: the rewritten schema is what the template receives), then the
//! schema checked against the 2020-12 metaschema (`Draft202012Validator.check_schema`; a
//! failure is a 400).
//!
//! The check here covers the metaschema's structural rules for every keyword it defines
//! (types of values, schemas where schemas go, non-empty schema lists, unique string lists,
//! non-negative integers, the patterns of `$id` and anchors). The `regex` format of `pattern`
//! and of `patternProperties` names is Python's `re`: the escapes and the named-group form it
//! refuses are refused here, other patterns it cannot compile (an unbalanced bracket) are not.
//! Nor is the depth at which Python's recursion limit stops the check (about 120 nested
//! schemas, less inside the server): kvaudit's JSON reader stops at 128.

use serde_json::Value as Json;

use crate::render::pymethods::{Ends, python_strip};

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
    let before = raw.split('(').next().unwrap_or(raw);
    let base = python_strip(before, None, Ends::Both).to_lowercase();
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
            // Names that repeat after the rewrite are kept once. Other values stay as they
            // are: any of them makes the schema invalid, so their order is never rendered.
            let mut seen = std::collections::HashSet::new();
            let mut out: Vec<Json> = Vec::with_capacity(items.len());
            for item in items.drain(..) {
                match item {
                    Json::String(raw) => {
                        let name = normalize_name(&raw).map_or(raw, str::to_string);
                        if seen.insert(name.clone()) {
                            out.push(Json::String(name));
                        }
                    }
                    other => out.push(other),
                }
            }
            *items = out;
        }
        _ => {}
    }
}

/// Keywords whose value is a map of schemas, one schema, or a list of schemas, where SGLang
/// rewrites types. The metaschema also checks `dependencies` (a map of schemas or of name
/// lists) and `contentSchema` (a schema), which the rewrite does not walk.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
const SCHEMA_LISTS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
const SCHEMAS: [&str; 10] = [
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
];

/// `normalize_json_schema_types`: rewrite `type` values in place, walking where SGLang walks.
pub fn normalize(schema: &mut Json) {
    match schema {
        Json::Array(items) => items.iter_mut().for_each(normalize),
        Json::Object(map) => {
            if let Some(t) = map.get_mut("type") {
                normalize_type(t);
            }
            for key in SCHEMA_MAPS {
                if let Some(Json::Object(nested)) = map.get_mut(key) {
                    nested.values_mut().for_each(normalize);
                }
            }
            for key in SCHEMA_LISTS {
                if let Some(Json::Array(nested)) = map.get_mut(key) {
                    nested.iter_mut().for_each(normalize);
                }
            }
            for key in SCHEMAS {
                if let Some(nested) = map.get_mut(key) {
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

/// No string twice (hashed: a list may hold a million of them).
fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> bool {
    let mut seen = std::collections::HashSet::new();
    items.into_iter().all(|s| seen.insert(s))
}

/// A list of distinct strings (the metaschema's `stringArray`).
fn string_array(v: &Json) -> bool {
    v.as_array().is_some_and(|a| {
        a.iter().all(Json::is_string) && distinct(a.iter().filter_map(Json::as_str))
    })
}

fn simple_type(v: &Json) -> bool {
    v.as_str().is_some_and(|t| STANDARD.contains(&t))
}

/// The metaschema's anchorString, `^[A-Za-z_][-A-Za-z0-9._]*$` as Python's `re.search` reads
/// it (`$` also matches before a final line break).
fn anchor_name(a: &str) -> bool {
    let a = a.strip_suffix('\n').unwrap_or(a);
    a.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
}

/// What Python's `re` refuses of a pattern that is valid elsewhere (the `regex` format of
/// `pattern` and of `patternProperties` names): an escape of an ASCII letter it does not know
/// (`\p{L}`, `\k<n>`, `\z`) and a named group in the `(?<name>…)` form.
fn python_refuses_pattern(p: &str) -> bool {
    const KNOWN: &str = "abBdDfnrsStvwWZAxuUN";
    let bytes = p.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                if let Some(&c) = bytes.get(i + 1)
                    && c.is_ascii_alphabetic()
                    && !KNOWN.as_bytes().contains(&c)
                {
                    return true;
                }
                i += 2;
            }
            b'(' if p[i..].starts_with("(?<")
                && !p[i..].starts_with("(?<=")
                && !p[i..].starts_with("(?<!") =>
            {
                return true;
            }
            _ => i += 1,
        }
    }
    false
}

/// Where a rule is broken, innermost segment first (the path is built only on failure).
#[derive(Debug)]
struct Fault {
    at: Vec<String>,
    why: &'static str,
}

impl Fault {
    fn new(key: &str, why: &'static str) -> Fault {
        Fault {
            at: vec![segment(key)],
            why,
        }
    }

    fn within(mut self, key: &str) -> Fault {
        self.at.push(segment(key));
        self
    }
}

/// A key of the client's for an error line: as it is when short and plain, else quoted and
/// cut (it may hold anything).
fn segment(key: &str) -> String {
    if key.len() <= 40
        && key
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b'"')
    {
        return key.to_string();
    }
    let short: String = key.chars().take(40).collect();
    let quoted = Json::String(short).to_string();
    if key.chars().count() > 40 {
        format!("{}…\"", &quoted[..quoted.len() - 1])
    } else {
        quoted
    }
}

/// The first metaschema rule a schema breaks, shown as `name/key/…: why`.
#[derive(Debug)]
pub struct SchemaError {
    name: &'static str,
    fault: Fault,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)?;
        for segment in self.fault.at.iter().rev() {
            write!(f, "/{segment}")?;
        }
        write!(f, ": {}", self.fault.why)
    }
}

impl std::error::Error for SchemaError {}

/// The first metaschema rule `schema` breaks; `name` stands for the schema in the error.
pub fn check(schema: &Json, name: &'static str) -> Result<(), SchemaError> {
    check_at(schema).map_err(|fault| SchemaError { name, fault })
}

fn check_at(schema: &Json) -> Result<(), Fault> {
    let map = match schema {
        Json::Bool(_) => return Ok(()),
        Json::Object(map) => map,
        _ => {
            return Err(Fault {
                at: Vec::new(),
                why: "a schema is an object or a boolean",
            });
        }
    };
    for (key, v) in map {
        let fail = |why| Err(Fault::new(key, why));
        match key.as_str() {
            "type" => {
                let ok = simple_type(v)
                    || v.as_array().is_some_and(|a| {
                        !a.is_empty()
                            && a.iter().all(simple_type)
                            && distinct(a.iter().filter_map(Json::as_str))
                    });
                if !ok {
                    return fail("not a JSON Schema type");
                }
            }
            "enum" | "examples" if !v.is_array() => return fail("not a list"),
            "required" if !string_array(v) => return fail("not a list of distinct strings"),
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties" | "minContains" | "maxContains"
                if !non_negative_integer(v) =>
            {
                return fail("not a non-negative integer");
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" if !v.is_number() => {
                return fail("not a number");
            }
            "multipleOf" if !v.as_f64().is_some_and(|f| f > 0.0) => {
                return fail("not a number above 0");
            }
            "uniqueItems" | "readOnly" | "writeOnly" | "deprecated" if !v.is_boolean() => {
                return fail("not a boolean");
            }
            "title" | "description" | "pattern" | "format" | "contentMediaType"
            | "contentEncoding" | "$id" | "$schema" | "$ref" | "$anchor" | "$dynamicRef"
            | "$dynamicAnchor" | "$comment" | "$recursiveRef" | "$recursiveAnchor"
                if !v.is_string() =>
            {
                return fail("not a string");
            }
            "$anchor" | "$dynamicAnchor" | "$recursiveAnchor"
                if !v.as_str().is_some_and(anchor_name) =>
            {
                return fail("not an anchor name");
            }
            // The metaschema's `$id` pattern: `^[^#]*#?$` (at most a final, empty fragment).
            "$id"
                if v.as_str().is_some_and(|id| {
                    let id = id.strip_suffix('\n').unwrap_or(id);
                    id.find('#').is_some_and(|i| i + 1 != id.len())
                }) =>
            {
                return fail("not a URI without a fragment");
            }
            "pattern" if v.as_str().is_some_and(python_refuses_pattern) => {
                return fail("not a regular expression Python compiles");
            }
            "dependentRequired" => match v.as_object() {
                Some(m) if m.values().all(string_array) => {}
                _ => return fail("not a map of lists of distinct strings"),
            },
            "$vocabulary" => match v.as_object() {
                Some(m) if m.values().all(Json::is_boolean) => {}
                _ => return fail("not a map of booleans"),
            },
            k if SCHEMA_MAPS.contains(&k) || k == "dependencies" => {
                let Some(m) = v.as_object() else {
                    return fail("not a map of schemas");
                };
                for (name, s) in m {
                    if k == "patternProperties" && python_refuses_pattern(name) {
                        return Err(Fault::new(name, "not a regular expression Python compiles")
                            .within(key));
                    }
                    // `dependencies` also takes a list of property names.
                    if k == "dependencies" && string_array(s) {
                        continue;
                    }
                    check_at(s).map_err(|f| f.within(name).within(key))?;
                }
            }
            k if SCHEMA_LISTS.contains(&k) => match v.as_array() {
                Some(a) if !a.is_empty() => {
                    for (i, s) in a.iter().enumerate() {
                        check_at(s).map_err(|f| f.within(&i.to_string()).within(key))?;
                    }
                }
                _ => return fail("not a non-empty list of schemas"),
            },
            k if SCHEMAS.contains(&k) || k == "contentSchema" => {
                check_at(v).map_err(|f| f.within(key))?
            }
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

    /// SGLang 0.5.23's verdicts (`normalize_json_schema_types`, then
    /// `Draft202012Validator.check_schema`, run in the environment .ci/sglang.sh installs) on
    /// schemas that reach each rule.
    #[test]
    fn the_metaschema_refuses_what_sglang_refuses() {
        let cases = [
            (
                r##"{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}"##,
                true,
            ),
            (r##"true"##, true),
            (r##"{"type": ["string", "null"], "minLength": 1.0}"##, true),
            (
                r##"{"dependencies": {"a": ["b"], "c": {"type": "string"}}}"##,
                true,
            ),
            (r##"{"type": "foo"}"##, false),
            (r##"[1]"##, false),
            (r##"{"required": "a"}"##, false),
            (r##"{"required": ["a", "a"]}"##, false),
            (r##"{"type": []}"##, false),
            (r##"{"anyOf": []}"##, false),
            (r##"{"properties": {"a": {"type": "int"}}}"##, true),
            (r##"{"properties": {"a": {"type": "internal"}}}"##, false),
            (r##"{"minLength": -1}"##, false),
            (r##"{"description": 3}"##, false),
            (r##"{"$id": "a#b"}"##, false),
            (r##"{"$id": "#a"}"##, false),
            (r##"{"$id": "a#"}"##, true),
            (r##"{"$id": "http://x/y"}"##, true),
            (r##"{"pattern": "^\\p{L}+$"}"##, false),
            (r##"{"pattern": "(?<year>\\d{4})"}"##, false),
            (r##"{"pattern": "(?<=a)b"}"##, true),
            (r##"{"pattern": "^[a-z]+\\d*$"}"##, true),
            (r##"{"patternProperties": {"^\\p{Lu}": {}}}"##, false),
            (
                r##"{"patternProperties": {"^x-": {"type": "string"}}}"##,
                true,
            ),
            (r##"{"$anchor": "x\n"}"##, true),
            (r##"{"$anchor": "1x"}"##, false),
            (r##"{"$anchor": "a.b-c"}"##, true),
            (r##"{"type": "\u001fint"}"##, true),
            (r##"{"type": ["int", "integer"]}"##, true),
            (r##"{"items": {"type": "list[str]"}}"##, true),
            (r##"{"multipleOf": 0}"##, false),
            (r##"{"enum": "a"}"##, false),
            (r##"{"dependentRequired": {"a": ["b", "b"]}}"##, false),
            (r##"{"if": {"type": "string"}, "then": 5}"##, false),
        ];
        for (text, accepted) in cases {
            let mut schema: Json = serde_json::from_str(text).unwrap();
            normalize(&mut schema);
            assert_eq!(check(&schema, "parameters").is_ok(), accepted, "{text}");
        }
        let mut long = serde_json::Map::new();
        long.insert("a/\u{1b}[31m".repeat(20), json!({"type": "nope"}));
        // A key of the client's is quoted, escaped and cut: no control character reaches the
        // terminal, and the line stays short.
        let err = check(&json!({"properties": long}), "parameters")
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\u{1b}'), "{err}");
        assert!(
            err.starts_with("parameters/properties/\"a/\\u001b[31m"),
            "{err}"
        );
        assert!(err.ends_with("…\"/type: not a JSON Schema type"), "{err}");
        assert!(err.len() < 200, "{err}");
        assert_eq!(
            check(
                &json!({"anyOf": [{"type": "object"}, {"items": {"required": 1}}]}),
                "p"
            )
            .map_err(|e| e.to_string()),
            Err("p/anyOf/1/items/required: not a list of distinct strings".to_string())
        );
    }
}
