//! Where a model's files come from (a local directory or the Hugging Face Hub) and what they say:
//! tokenizer, chat templates, special tokens and stop tokens.

pub mod gguf;
mod hub;
mod resolve;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

pub use hub::{
    Fetched, HubSettings, fetch as fetch_from_hub, fetch_detailed, is_hub_id, redact_url,
    transport_words,
};
pub use resolve::{ModelSpec, resolve_model, tokenizer_for};

/// Files kvaudit reads from a model repository; the first two are required.
pub const MODEL_FILES: [&str; 6] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
    "special_tokens_map.json",
];

/// The files [`ModelFiles::from_dir`] may read from `dir` (those that exist or not), for
/// callers that must not write over any of them.
pub fn files_read(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = MODEL_FILES.iter().map(|f| dir.join(f)).collect();
    if let Ok(extra) = std::fs::read_dir(dir.join("additional_chat_templates")) {
        files.extend(extra.filter_map(|e| e.ok().map(|e| e.path())));
    }
    files
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Missing(String),
    #[error("cannot read {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not valid JSON")]
    Json {
        path: String,
        source: serde_json::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Hub(String),
}

/// The chat templates of a model, as transformers would load them.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatTemplates {
    None,
    Single {
        text: String,
        origin: String,
    },
    Named {
        templates: Vec<(String, String)>,
        origin: String,
    },
}

/// The template chosen for one run.
#[derive(Debug, Clone)]
pub struct SelectedTemplate {
    pub text: String,
    /// Where it came from, e.g. `chat_template.jinja` or `tokenizer_config.json#tool_use`.
    pub origin: String,
}

/// Everything kvaudit needs from a model repository.
#[derive(Debug, Clone)]
pub struct ModelFiles {
    /// What the user named: a directory or a Hub id.
    pub source: String,
    pub dir: PathBuf,
    pub tokenizer_path: PathBuf,
    pub templates: ChatTemplates,
    /// The special tokens transformers hands the template (`bos_token`, `eos_token`, ...).
    pub special_tokens: Map<String, Json>,
    /// Stop token ids from generation_config.json.
    pub stop_token_ids: Vec<u32>,
    /// How a Hub id was resolved (None for a local directory).
    pub fetched: Option<Fetched>,
    /// Made from a GGUF file's metadata ([`gguf`]): the tokenizer is llama.cpp's own, not a
    /// tokenizer.json that llama.cpp would read differently.
    pub gguf: Option<gguf::GgufOrigin>,
}

/// The attributes transformers exposes as template variables when set.
const SPECIAL_TOKEN_KEYS: [&str; 8] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
    "additional_special_tokens",
];

impl ModelFiles {
    /// The tokenizer as the user knows it: the GGUF file it was made from, else its path.
    pub fn tokenizer_shown(&self) -> String {
        match &self.gguf {
            Some(g) => g.file.display().to_string(),
            None => self.tokenizer_path.display().to_string(),
        }
    }

    /// The name llm-d would see for `model` (what `--model` named): a Hub id as given (without
    /// `@revision`), or for a local directory the name its config files were saved under; with
    /// where that name came from.
    pub fn served_name(&self, model: &str) -> Option<(String, String)> {
        if !std::path::Path::new(model).is_dir() && is_hub_id(model) {
            let id = model.split_once('@').map_or(model, |(id, _)| id);
            return Some((id.to_string(), "the Hub id".into()));
        }
        self.declared_name()
            .map(|(name, file)| (name, format!("`_name_or_path` in {file}")))
    }

    /// Load a model directory. `template` and `tokenizer` override the directory's files.
    pub fn from_dir(
        dir: &Path,
        source: &str,
        template: Option<&Path>,
        tokenizer: Option<&Path>,
    ) -> Result<ModelFiles, ModelError> {
        if !dir.is_dir() {
            return Err(ModelError::Missing(format!(
                "model directory {} does not exist",
                dir.display()
            )));
        }
        let tokenizer_path = match tokenizer {
            Some(p) => p.to_path_buf(),
            None => dir.join("tokenizer.json"),
        };
        // Only a missing file is reported here: one that is there but not a regular file (a
        // FIFO, a device) gets its own error from the tokenizer loader, which must check the
        // opened file anyway.
        if !tokenizer_path.exists() {
            return Err(ModelError::Missing(match tokenizer {
                Some(p) => format!("tokenizer file {} does not exist", p.display()),
                None => format!(
                    "no tokenizer.json in {} (pass --tokenizer FILE to use another)",
                    dir.display()
                ),
            }));
        }
        let config_path = dir.join("tokenizer_config.json");
        let config = if config_path.is_file() {
            read_json(&config_path)?
        } else {
            Json::Object(Map::new())
        };
        let special_tokens = special_tokens(&config, &dir.join("special_tokens_map.json"))?;
        let templates = match template {
            Some(path) => ChatTemplates::Single {
                text: read_text(path)?,
                origin: path.display().to_string(),
            },
            None => load_templates(dir, &config)?,
        };
        let stop_token_ids = stop_tokens(&dir.join("generation_config.json"))?;
        Ok(ModelFiles {
            source: source.to_string(),
            dir: dir.to_path_buf(),
            tokenizer_path,
            templates,
            special_tokens,
            stop_token_ids,
            fetched: None,
            gguf: None,
        })
    }

    /// The model name the directory's files were saved under: `_name_or_path` in config.json
    /// (transformers writes the Hub id it loaded from), else `name_or_path` in
    /// tokenizer_config.json. Returns the name and the file it came from.
    pub fn declared_name(&self) -> Option<(String, &'static str)> {
        [
            ("config.json", "_name_or_path"),
            ("tokenizer_config.json", "name_or_path"),
        ]
        .into_iter()
        .find_map(|(file, key)| {
            let path = self.dir.join(file);
            let v = read_json(&path).ok()?;
            let name = v.get(key)?.as_str()?.trim();
            (!name.is_empty()).then(|| (name.to_string(), file))
        })
    }

    /// The first of several named templates (the one a server without a name to ask for and
    /// without transformers' `tool_use` rule takes).
    pub fn first_template_name(&self) -> Option<&str> {
        match &self.templates {
            ChatTemplates::Named { templates, .. } => templates.first().map(|(k, _)| k.as_str()),
            _ => None,
        }
    }

    /// transformers' choice: a named template when asked for, else `tool_use` when tools are
    /// passed and it exists, else `default`.
    pub fn select_template(
        &self,
        name: Option<&str>,
        has_tools: bool,
    ) -> Result<SelectedTemplate, ModelError> {
        match &self.templates {
            ChatTemplates::None => Err(ModelError::Missing(format!(
                "{} has no chat template (no chat_template.jinja, chat_template.json or \
                 `chat_template` in tokenizer_config.json); pass --template FILE",
                self.source
            ))),
            ChatTemplates::Single { text, origin } => match name {
                Some(n) if n != "default" => Err(ModelError::Missing(format!(
                    "{} has a single chat template, not one named {n:?}",
                    self.source
                ))),
                _ => Ok(SelectedTemplate {
                    text: text.clone(),
                    origin: origin.clone(),
                }),
            },
            ChatTemplates::Named { templates, origin } => {
                let find = |n: &str| templates.iter().find(|(k, _)| k == n);
                let chosen = match name {
                    Some(n) => find(n).ok_or_else(|| {
                        ModelError::Missing(format!(
                            "{} has no chat template named {n:?} (it has: {})",
                            self.source,
                            templates.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
                        ))
                    })?,
                    None if has_tools && find("tool_use").is_some() => find("tool_use").unwrap_or(&templates[0]),
                    None => find("default").ok_or_else(|| {
                        ModelError::Missing(format!(
                            "{} has several chat templates and none named \"default\"; pick one with --template-name ({})",
                            self.source,
                            templates.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
                        ))
                    })?,
                };
                Ok(SelectedTemplate {
                    text: chosen.1.clone(),
                    origin: format!("{origin}#{}", chosen.0),
                })
            }
        }
    }
}

/// The largest model file kvaudit reads besides tokenizer.json: chat templates and configs are
/// kilobytes (tokenizer_config.json with every added token spelled out reaches a few MB).
const MAX_MODEL_FILE: u64 = 32 << 20;

fn read_text(path: &Path) -> Result<String, ModelError> {
    crate::input::read_text(path, MAX_MODEL_FILE).map_err(|source| ModelError::Read {
        path: path.display().to_string(),
        source,
    })
}

fn read_json(path: &Path) -> Result<Json, ModelError> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|source| ModelError::Json {
        path: path.display().to_string(),
        source,
    })
}

/// `chat_template.jinja` (plus `additional_chat_templates/*.jinja`) wins over
/// `chat_template.json`, which wins over `chat_template` in tokenizer_config.json.
fn load_templates(dir: &Path, config: &Json) -> Result<ChatTemplates, ModelError> {
    let jinja = dir.join("chat_template.jinja");
    let extra_dir = dir.join("additional_chat_templates");
    let mut named: Vec<(String, String)> = Vec::new();
    if jinja.is_file() {
        named.push(("default".into(), read_text(&jinja)?));
    }
    if extra_dir.is_dir() {
        let mut extra: Vec<PathBuf> = std::fs::read_dir(&extra_dir)
            .map_err(|source| ModelError::Read {
                path: extra_dir.display().to_string(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
            .collect();
        extra.sort();
        for p in extra {
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            named.push((name, read_text(&p)?));
        }
    }
    let mut named = by_name(named);
    if !named.is_empty() {
        return Ok(if named.len() == 1 && named[0].0 == "default" {
            ChatTemplates::Single {
                text: named.remove(0).1,
                origin: "chat_template.jinja".into(),
            }
        } else {
            ChatTemplates::Named {
                templates: named,
                origin: "chat_template.jinja".into(),
            }
        });
    }
    let json_file = dir.join("chat_template.json");
    if json_file.is_file() {
        let v = read_json(&json_file)?;
        if let Some(t) = v.get("chat_template") {
            return template_value(t, "chat_template.json");
        }
    }
    match config.get("chat_template") {
        Some(t) => template_value(t, "tokenizer_config.json"),
        None => Ok(ChatTemplates::None),
    }
}

/// Named templates as transformers holds them, in a dict built in file order
/// (`{t["name"]: t["template"] for t in chat_template}`, and `chat_template.jinja` as "default"
/// before `additional_chat_templates/`): a name given twice keeps its first place and its
/// last template.
fn by_name(templates: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(templates.len());
    for (name, text) in templates {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = text,
            None => out.push((name, text)),
        }
    }
    out
}

/// A `chat_template` value: a string, or a list of `{name, template}` objects.
fn template_value(v: &Json, origin: &str) -> Result<ChatTemplates, ModelError> {
    match v {
        Json::Null => Ok(ChatTemplates::None),
        Json::String(s) => Ok(ChatTemplates::Single {
            text: s.clone(),
            origin: origin.into(),
        }),
        Json::Array(items) => {
            let mut templates = Vec::new();
            for item in items {
                match (
                    item.get("name").and_then(Json::as_str),
                    item.get("template").and_then(Json::as_str),
                ) {
                    (Some(n), Some(t)) => templates.push((n.to_string(), t.to_string())),
                    _ => {
                        return Err(ModelError::Invalid(format!(
                            "{origin}: chat_template list entries need `name` and `template` strings"
                        )));
                    }
                }
            }
            Ok(ChatTemplates::Named {
                templates: by_name(templates),
                origin: origin.into(),
            })
        }
        _ => Err(ModelError::Invalid(format!(
            "{origin}: chat_template must be a string or a list of named templates"
        ))),
    }
}

/// Special tokens as plain strings: config values may be strings or AddedToken objects;
/// special_tokens_map.json fills in what the config does not set.
fn special_tokens(config: &Json, map_file: &Path) -> Result<Map<String, Json>, ModelError> {
    let map = if map_file.is_file() {
        read_json(map_file)?
    } else {
        Json::Null
    };
    let mut out = Map::new();
    for key in SPECIAL_TOKEN_KEYS {
        let value = config
            .get(key)
            .filter(|v| !v.is_null())
            .or_else(|| map.get(key).filter(|v| !v.is_null()));
        let Some(value) = value else { continue };
        let text = if key == "additional_special_tokens" {
            let list: Vec<Json> = value
                .as_array()
                .map(|a| a.iter().filter_map(token_text).map(Json::String).collect())
                .unwrap_or_default();
            if list.is_empty() {
                continue;
            }
            Json::Array(list)
        } else {
            match token_text(value) {
                Some(t) if !t.is_empty() => Json::String(t),
                Some(_) => continue,
                None => {
                    return Err(ModelError::Invalid(format!(
                        "tokenizer_config.json: {key} is neither a string nor an AddedToken object"
                    )));
                }
            }
        };
        out.insert(key.to_string(), text);
    }
    Ok(out)
}

fn token_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Object(o) => o.get("content").and_then(Json::as_str).map(str::to_string),
        _ => None,
    }
}

fn stop_tokens(path: &Path) -> Result<Vec<u32>, ModelError> {
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let v = read_json(path)?;
    let ids = match v.get("eos_token_id") {
        Some(Json::Number(n)) => n.as_u64().into_iter().collect(),
        Some(Json::Array(a)) => a.iter().filter_map(Json::as_u64).collect(),
        _ => Vec::new(),
    };
    Ok(ids.into_iter().map(|i| i as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = d.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    #[test]
    fn template_precedence_follows_transformers() {
        let d = dir_with(&[
            ("tokenizer.json", "{}"),
            (
                "tokenizer_config.json",
                r#"{"chat_template": "config", "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "unk_token": null}"#,
            ),
            ("chat_template.json", r#"{"chat_template": "json"}"#),
        ]);
        let m = ModelFiles::from_dir(d.path(), "x", None, None).unwrap();
        assert_eq!(m.select_template(None, false).unwrap().text, "json");
        assert_eq!(
            m.special_tokens.get("bos_token").and_then(Json::as_str),
            Some("<s>")
        );
        assert!(!m.special_tokens.contains_key("unk_token"));
        std::fs::write(d.path().join("chat_template.jinja"), "jinja").unwrap();
        let m = ModelFiles::from_dir(d.path(), "x", None, None).unwrap();
        let t = m.select_template(None, false).unwrap();
        assert_eq!(
            (t.text.as_str(), t.origin.as_str()),
            ("jinja", "chat_template.jinja")
        );
    }

    #[test]
    fn named_templates_pick_tool_use_when_tools_are_passed() {
        let d = dir_with(&[
            ("tokenizer.json", "{}"),
            (
                "tokenizer_config.json",
                r#"{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}"#,
            ),
            ("generation_config.json", r#"{"eos_token_id": [1, 7]}"#),
        ]);
        let m = ModelFiles::from_dir(d.path(), "x", None, None).unwrap();
        assert_eq!(m.select_template(None, false).unwrap().text, "D");
        assert_eq!(m.select_template(None, true).unwrap().text, "T");
        assert_eq!(
            m.select_template(Some("tool_use"), false).unwrap().origin,
            "tokenizer_config.json#tool_use"
        );
        assert!(
            m.select_template(Some("rag"), false)
                .unwrap_err()
                .to_string()
                .contains("default, tool_use")
        );
        assert_eq!(m.stop_token_ids, vec![1, 7]);
    }

    /// transformers builds a dict from the list, so a name given twice keeps its last
    /// template (and its first place among the names); kvaudit took the first.
    #[test]
    fn a_name_given_twice_keeps_its_last_template() {
        let d = dir_with(&[
            ("tokenizer.json", "{}"),
            (
                "tokenizer_config.json",
                r#"{"chat_template": [{"name": "default", "template": "D1"}, {"name": "tool_use", "template": "T"}, {"name": "default", "template": "D2"}]}"#,
            ),
        ]);
        let m = ModelFiles::from_dir(d.path(), "x", None, None).unwrap();
        assert_eq!(m.select_template(None, false).unwrap().text, "D2");
        assert!(
            m.select_template(Some("rag"), false)
                .unwrap_err()
                .to_string()
                .contains("(it has: default, tool_use)")
        );
        // additional_chat_templates/default.jinja replaces chat_template.jinja, as the later
        // entry of transformers' dict.
        let d = dir_with(&[
            ("tokenizer.json", "{}"),
            ("tokenizer_config.json", "{}"),
            ("chat_template.jinja", "J"),
        ]);
        std::fs::create_dir(d.path().join("additional_chat_templates")).unwrap();
        std::fs::write(
            d.path().join("additional_chat_templates/default.jinja"),
            "A",
        )
        .unwrap();
        let m = ModelFiles::from_dir(d.path(), "x", None, None).unwrap();
        assert_eq!(m.select_template(None, false).unwrap().text, "A");
    }

    #[test]
    fn missing_pieces_are_named() {
        let d = dir_with(&[("tokenizer_config.json", "{}")]);
        let e = ModelFiles::from_dir(d.path(), "x", None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no tokenizer.json"), "{e}");
        std::fs::write(d.path().join("tokenizer.json"), "{}").unwrap();
        let m = ModelFiles::from_dir(d.path(), "x", None, None).unwrap();
        assert!(
            m.select_template(None, false)
                .unwrap_err()
                .to_string()
                .contains("has no chat template")
        );
        std::fs::write(d.path().join("tokenizer_config.json"), "{ bad").unwrap();
        let e = ModelFiles::from_dir(d.path(), "x", None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not valid JSON"), "{e}");
    }
}
