//! The blocking HTTP client of `probe` (ureq, as the Hub client): JSON in and out, every answer
//! bounded in size and time, the API key sent only to the `--url` origin and redirects never
//! followed (a redirect is an error, so no header of ours reaches another host).

use std::time::Duration;

use serde_json::Value as Json;
use ureq::http::Uri;

use super::ProbeError;

/// How requests are sent.
#[derive(Clone)]
pub struct HttpSettings {
    /// Sent as `Authorization: Bearer …` to the `--url` origin only; never printed.
    pub api_key: Option<String>,
    /// Extra request headers (`--header NAME: VALUE`), for routers that need one.
    pub headers: Vec<(String, String)>,
    pub connect_timeout: Duration,
    /// For a whole request, generation included.
    pub timeout: Duration,
    /// The largest response body read.
    pub max_body: u64,
}

impl std::fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSettings")
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("headers", &self.headers.len())
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("max_body", &self.max_body)
            .finish()
    }
}

/// The most a server's answer may be: a chat completion with per-token ids for a few thousand
/// tokens is well under a megabyte.
pub const DEFAULT_MAX_BODY: u64 = 16 << 20;

/// One answer: its status, the headers kept (lower-case names) and the body parsed as JSON.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Json,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An answer's status, lower-cased headers and body bytes.
type RawAnswer = (u16, Vec<(String, String)>, Vec<u8>);

pub struct Client {
    agent: ureq::Agent,
    /// `--url` without a trailing slash, e.g. `http://host:8000/v1`.
    base: String,
    /// `--url` without a trailing `/v1`: llama-server's own endpoints live there.
    root: String,
    /// What messages call the server (scheme, host and port; never a path or query).
    shown: String,
    settings: HttpSettings,
}

impl Client {
    pub fn new(url: &str, settings: HttpSettings) -> Result<Client, ProbeError> {
        // The URL may carry credentials or a token: only its redacted form is shown.
        let shown_url = crate::model::redact_url(url);
        let bad = |why: &str| ProbeError::Usage(format!("--url {shown_url:?}: {why}"));
        let uri: Uri = url
            .parse()
            .map_err(|_| bad("not a URL (expected e.g. http://host:8000/v1)"))?;
        match uri.scheme_str() {
            Some("http" | "https") => {}
            _ => return Err(bad("the scheme must be http or https")),
        }
        let Some(authority) = uri.authority() else {
            return Err(bad("no host"));
        };
        if authority.as_str().contains('@') {
            return Err(bad(
                "credentials in the URL are not sent; use --api-key or OPENAI_API_KEY",
            ));
        }
        if uri.query().is_some() {
            return Err(bad("a query string is not allowed"));
        }
        for (name, value) in &settings.headers {
            if name.eq_ignore_ascii_case("authorization") && settings.api_key.is_some() {
                return Err(ProbeError::Usage(
                    "--header Authorization and an API key (--api-key or OPENAI_API_KEY) \
                     conflict: give one"
                        .into(),
                ));
            }
            ureq::http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ProbeError::Usage(format!("--header {name:?}: not a header name")))?;
            ureq::http::HeaderValue::from_str(value).map_err(|_| {
                ProbeError::Usage(format!("--header {name}: the value is not a header value"))
            })?;
        }
        let base = url.trim_end_matches('/').to_string();
        let root = base.strip_suffix("/v1").unwrap_or(&base).to_string();
        let shown = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("http"),
            authority.as_str()
        );
        let config = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(format!("kvaudit/{}", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(settings.connect_timeout))
            .timeout_global(Some(settings.timeout))
            .build();
        Ok(Client {
            agent: ureq::Agent::new_with_config(config),
            base,
            root,
            shown,
            settings,
        })
    }

    /// The server as messages name it: scheme, host and port.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// `GET {url}{path}` (`path` under `/v1` when `under_v1`).
    pub fn get(&self, path: &str, under_v1: bool) -> Result<Answer, ProbeError> {
        self.finish(path, self.send_get(path, under_v1))
    }

    fn send_get(
        &self,
        path: &str,
        under_v1: bool,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let mut req = self.agent.get(&self.url(path, under_v1));
        for (k, v) in self.request_headers() {
            req = req.header(k, v);
        }
        req.call()
    }

    /// `GET {url}{path}` of a text answer (Prometheus' `/metrics`), under the same bounds.
    pub fn get_text(&self, path: &str, under_v1: bool) -> Result<String, ProbeError> {
        let (status, _, bytes) = self.read(path, self.send_get(path, under_v1))?;
        if !(200..300).contains(&status) {
            return Err(ProbeError::Status {
                endpoint: path.to_string(),
                status,
                message: error_message(&bytes, &self.secrets()),
            });
        }
        String::from_utf8(bytes).map_err(|_| ProbeError::Protocol {
            endpoint: path.to_string(),
            why: "the answer is not UTF-8 text".into(),
        })
    }

    /// `POST {url}{path}` with a JSON body.
    pub fn post(&self, path: &str, under_v1: bool, body: &Json) -> Result<Answer, ProbeError> {
        let url = self.url(path, under_v1);
        let mut req = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json");
        for (k, v) in self.request_headers() {
            req = req.header(k, v);
        }
        let bytes = serde_json::to_vec(body).map_err(|e| ProbeError::Protocol {
            endpoint: path.to_string(),
            why: format!("the request could not be written ({e})"),
        })?;
        self.finish(path, req.send(&bytes[..]))
    }

    fn url(&self, path: &str, under_v1: bool) -> String {
        format!("{}{path}", if under_v1 { &self.base } else { &self.root })
    }

    /// What this client sends that must not come back in a message: the key and the values
    /// of extra headers.
    fn secrets(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.settings.api_key.iter().map(String::as_str).collect();
        // A short header value ("1", "json") would blank ordinary words.
        v.extend(
            self.settings
                .headers
                .iter()
                .map(|(_, value)| value.as_str())
                .filter(|value| value.len() >= 6),
        );
        // Longest first: a value that contains another is blanked whole.
        v.sort_by_key(|s| std::cmp::Reverse(s.len()));
        v
    }

    fn request_headers(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = vec![
            ("Accept".into(), "application/json".into()),
            ("Accept-Encoding".into(), "identity".into()),
        ];
        out.extend(self.settings.headers.iter().cloned());
        if let Some(key) = &self.settings.api_key {
            out.push(("Authorization".into(), format!("Bearer {key}")));
        }
        out
    }

    fn finish(
        &self,
        endpoint: &str,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Answer, ProbeError> {
        let (status, headers, bytes) = self.read(endpoint, sent)?;
        let body: Json = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(_) if !(200..300).contains(&status) => Json::Null,
            Err(e) => {
                return Err(ProbeError::Protocol {
                    endpoint: endpoint.to_string(),
                    why: format!("the answer is not JSON ({e})"),
                });
            }
        };
        if !(200..300).contains(&status) {
            return Err(ProbeError::Status {
                endpoint: endpoint.to_string(),
                status,
                message: error_message(&bytes, &self.secrets()),
            });
        }
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// The answer's status, headers and body (at most `max_body` bytes); a redirect is an
    /// error (the key goes to the --url host only).
    fn read(
        &self,
        endpoint: &str,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<RawAnswer, ProbeError> {
        let mut resp = sent.map_err(|e| ProbeError::Unreachable {
            server: self.shown.clone(),
            why: transport(&e),
        })?;
        let status = resp.status().as_u16();
        let headers: Vec<(String, String)> = resp
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.into())))
            .collect();
        if (300..400).contains(&status) {
            return Err(ProbeError::Protocol {
                endpoint: endpoint.to_string(),
                why: format!(
                    "HTTP {status} redirect: probe follows no redirects (the API key and \
                     headers go to the --url host only); give the final URL"
                ),
            });
        }
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(self.settings.max_body)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => ProbeError::Protocol {
                    endpoint: endpoint.to_string(),
                    why: format!("the answer is larger than {} bytes", self.settings.max_body),
                },
                other => ProbeError::Unreachable {
                    server: self.shown.clone(),
                    why: transport(&other),
                },
            })?;
        Ok((status, headers, bytes))
    }
}

/// The server's own words from an error body (`{"error": {"message": …}}`, `{"message": …}`,
/// `{"detail": …}`), cut to one short line: the body is untrusted, and a server may quote the
/// request back, key included, so every value in `secrets` is blanked before the line is cut
/// (a cut through a key would leave its start).
fn error_message(bytes: &[u8], secrets: &[&str]) -> Option<String> {
    let body: Option<Json> = serde_json::from_slice(bytes).ok();
    let plain;
    let text = match &body {
        Some(body) => body
            .pointer("/error/message")
            .or_else(|| body.get("error").filter(|e| e.is_string()))
            .or_else(|| body.get("message"))
            .or_else(|| body.get("detail"))
            .and_then(Json::as_str)?,
        // A proxy's or framework's plain-text answer ("Internal Server Error", an HTML page
        // of a gateway): its start still says what went wrong.
        // Secrets are redacted from the whole of it before anything is cut.
        None => {
            plain = String::from_utf8_lossy(bytes);
            &plain
        }
    };
    let mut text = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(s, "[redacted]");
    }
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    let line: String = words.join(" ").chars().take(200).collect();
    (!line.is_empty()).then_some(line)
}

/// A transport error in words, without the URL.
fn transport(e: &ureq::Error) -> String {
    crate::model::transport_words(e, "--timeout, --connect-timeout")
}
