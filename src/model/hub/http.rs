//! The few HTTP requests a download needs, made here rather than by hf-hub so that every rule
//! about what is sent where is ours: hf-hub 0.5 follows a metadata redirect to any host with
//! `Authorization` still attached, panics on a redirect without `Location`, trusts `ETag` and
//! `X-Repo-Commit` as path parts, and has no timeouts or size cap.
//!
//! The protocol is huggingface_hub's: `HEAD …/resolve/REV/FILE` without following redirects
//! off the endpoint, metadata from `X-Repo-Commit` and `X-Linked-Etag`/`ETag`, then a GET of
//! the file (or of the `Location` a cross-host redirect named, which carries no token).

use std::io::{Read, Write};
use std::time::Duration;

use ureq::http::{HeaderMap, Uri};

/// Redirects followed on one request before giving up.
const MAX_REDIRECTS: usize = 5;

/// Scheme, host and port: where a token may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    fn of(uri: &Uri) -> Option<Origin> {
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let host = uri.host()?.to_ascii_lowercase();
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        Some(Origin { scheme, host, port })
    }
}

/// `HF_ENDPOINT` parsed once: the base for URLs, the origin the token belongs to, and a form
/// safe to print (no `user:password@`).
#[derive(Debug, Clone)]
pub struct Endpoint {
    base: String,
    origin: Origin,
    pub shown: String,
}

/// An `HF_ENDPOINT` kvaudit cannot send requests to; `shown` is it with credentials removed.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("HF_ENDPOINT {shown:?} is not a URL")]
    NotAUrl { shown: String },
    #[error("HF_ENDPOINT {shown:?} must start with http:// or https://")]
    Scheme { shown: String },
    #[error("HF_ENDPOINT {shown:?} has no host")]
    NoHost { shown: String },
}

impl Endpoint {
    pub fn parse(text: &str) -> Result<Endpoint, EndpointError> {
        let shown = redact(text);
        let base = text.trim_end_matches('/').to_string();
        let Ok(uri) = base.parse::<Uri>() else {
            return Err(EndpointError::NotAUrl { shown });
        };
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => return Err(EndpointError::Scheme { shown }),
        }
        let Some(origin) = Origin::of(&uri) else {
            return Err(EndpointError::NoHost { shown });
        };
        Ok(Endpoint {
            base,
            origin,
            shown: redact(text).trim_end_matches('/').to_string(),
        })
    }

    /// The URL of a file: the revision percent-encoded whole (a `refs/pr/1` is one path
    /// segment), as huggingface_hub quotes it.
    pub fn resolve_url(&self, id: &str, revision: &str, file: &str) -> String {
        format!(
            "{}/{id}/resolve/{}/{file}",
            self.base,
            encode_segment(revision)
        )
    }
}

/// A URL with any `user:password@` removed, for messages.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(end) => (&url[..end + 3], &url[end + 3..]),
        None => ("", url),
    };
    // The credentials end at the last `@` before the path; a hostile one may hold `?` or `#`.
    let path_start = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..path_start].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    // A query or fragment can carry a token (`?token=…`): never shown.
    match rest.find(['?', '#']) {
        Some(q) => format!("{scheme}{}?[redacted]", &rest[..q]),
        None => format!("{scheme}{rest}"),
    }
}

fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Time and size bounds for one download (huggingface_hub's variable names where it has one).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connecting and each wait for data (`HF_HUB_DOWNLOAD_TIMEOUT`, default 10 s).
    pub read_timeout: Duration,
    /// The metadata request as a whole (`HF_HUB_ETAG_TIMEOUT`, default 10 s).
    pub metadata_timeout: Duration,
    /// One file's whole body, so a server sending a byte a second cannot hold a run forever
    /// (`KVAUDIT_HUB_BODY_TIMEOUT`, default 300 s).
    pub body_timeout: Duration,
    /// The largest file accepted (`KVAUDIT_HUB_MAX_FILE_SIZE`, default 512 MiB; the largest
    /// real tokenizer.json files are about 35 MB).
    pub max_file_size: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            read_timeout: Duration::from_secs(10),
            metadata_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(300),
            max_file_size: 512 << 20,
        }
    }
}

/// Why a request failed, kept typed so the caller can branch on the status.
#[derive(Debug)]
pub enum HttpError {
    Status(u16),
    /// Connecting, a timeout, a broken transfer: never includes the URL (it may carry userinfo).
    Transport(String),
    /// The server answered, but with something a Hub does not send.
    Protocol(String),
    Io(std::io::Error),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Status(code) => write!(f, "the server answered HTTP {code}"),
            HttpError::Transport(why) | HttpError::Protocol(why) => f.write_str(why),
            HttpError::Io(e) => write!(f, "cannot write the download: {e}"),
        }
    }
}

/// What the metadata request says about one file.
#[derive(Debug)]
pub struct FileMeta {
    pub commit: String,
    /// The raw `ETag` (validated into a blob name by the cache).
    pub etag: String,
    pub size: Option<u64>,
    /// Where to GET the body.
    pub location: String,
}

pub struct Client {
    agent: ureq::Agent,
    endpoint: Endpoint,
    token: Option<String>,
    limits: Limits,
}

impl Client {
    pub fn new(endpoint: Endpoint, token: Option<String>, limits: Limits) -> Client {
        let config = ureq::Agent::config_builder()
            // Redirects are followed here, one hop at a time, to decide on the token per hop.
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(format!("kvaudit/{}", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(limits.read_timeout))
            .timeout_recv_response(Some(limits.read_timeout))
            .timeout_per_read(Some(limits.read_timeout))
            .build();
        Client {
            agent: ureq::Agent::new_with_config(config),
            endpoint,
            token,
            limits,
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The token goes only to the endpoint's own scheme, host and port — huggingface_hub's
    /// rule of dropping `Authorization` on a redirect to another host.
    fn auth_for(&self, url: &Uri) -> Option<String> {
        let token = self.token.as_ref()?;
        (Origin::of(url).as_ref() == Some(&self.endpoint.origin)).then(|| format!("Bearer {token}"))
    }

    /// Send one hop: bytes as stored (no compression, so sizes and hashes are the file's),
    /// and the token only where it belongs.
    fn send(
        &self,
        req: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
        url: &Uri,
    ) -> Result<ureq::http::Response<ureq::Body>, HttpError> {
        let mut req = req.header("Accept-Encoding", "identity");
        if let Some(auth) = self.auth_for(url) {
            req = req.header("Authorization", auth);
        }
        req.call().map_err(transport)
    }

    /// HEAD the file's resolve URL. Redirects on the endpoint itself (a renamed repository)
    /// are followed; a redirect elsewhere (a CDN) ends the metadata request, whose headers
    /// already carry the commit and ETag, and names the download location.
    pub fn metadata(&self, url: &str) -> Result<FileMeta, HttpError> {
        let mut url = parse_url(url)?;
        for _ in 0..=MAX_REDIRECTS {
            let req = self
                .agent
                .head(url.clone())
                .config()
                .timeout_global(Some(self.limits.metadata_timeout))
                .build();
            let resp = self.send(req, &url)?;
            let status = resp.status().as_u16();
            let headers = resp.headers();
            if (300..400).contains(&status) {
                let next = location(&url, headers)?;
                if Origin::of(&next) == Some(self.endpoint.origin.clone()) {
                    url = next;
                    continue;
                }
                return meta_from(headers, next.to_string());
            }
            if status != 200 {
                return Err(HttpError::Status(status));
            }
            return meta_from(headers, url.to_string());
        }
        Err(HttpError::Protocol(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// GET `url` into `out`, at most `max_file_size` bytes, within the body timeout. Returns
    /// the byte count. Redirects are followed; the token is dropped off the endpoint's origin.
    pub fn download(
        &self,
        url: &str,
        out: &mut impl Write,
        mut on_progress: impl FnMut(u64, Option<u64>),
    ) -> Result<u64, HttpError> {
        let mut url = parse_url(url)?;
        for _ in 0..=MAX_REDIRECTS {
            let req = self
                .agent
                .get(url.clone())
                .config()
                .timeout_recv_body(Some(self.limits.body_timeout))
                .build();
            let resp = self.send(req, &url)?;
            let status = resp.status().as_u16();
            if (300..400).contains(&status) {
                url = location(&url, resp.headers())?;
                continue;
            }
            if status != 200 {
                return Err(HttpError::Status(status));
            }
            if is_html(resp.headers()) {
                return Err(HttpError::Protocol(
                    "the server sent an HTML page instead of the file (a proxy or login page?)"
                        .into(),
                ));
            }
            let max = self.limits.max_file_size;
            let declared = resp.body().content_length();
            if declared.is_some_and(|n| n > max) {
                return Err(too_big(max));
            }
            let mut body = resp.into_body().into_with_config().limit(u64::MAX).reader();
            let mut buf = vec![0u8; 64 << 10];
            let mut total: u64 = 0;
            loop {
                let n = body.read(&mut buf).map_err(|e| read_error(&e))?;
                if n == 0 {
                    break;
                }
                total += n as u64;
                if total > max {
                    return Err(too_big(max));
                }
                out.write_all(&buf[..n]).map_err(HttpError::Io)?;
                on_progress(total, declared);
            }
            if declared.is_some_and(|n| n != total) {
                return Err(HttpError::Transport(format!(
                    "the transfer ended after {total} of {} bytes",
                    declared.unwrap_or_default()
                )));
            }
            return Ok(total);
        }
        Err(HttpError::Protocol(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }
}

fn too_big(max: u64) -> HttpError {
    HttpError::Protocol(format!(
        "the file is larger than {max} bytes (KVAUDIT_HUB_MAX_FILE_SIZE)"
    ))
}

fn parse_url(url: &str) -> Result<Uri, HttpError> {
    let uri: Uri = url
        .parse()
        .map_err(|_| HttpError::Protocol(format!("not a URL: {}", redact(url))))?;
    match uri.scheme_str() {
        Some("http") | Some("https") if uri.host().is_some() => Ok(uri),
        _ => Err(HttpError::Protocol(format!(
            "not an http(s) URL: {}",
            redact(url)
        ))),
    }
}

/// The target of a redirect, resolved against the URL that answered it.
fn location(from: &Uri, headers: &HeaderMap) -> Result<Uri, HttpError> {
    let loc = headers
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| HttpError::Protocol("a redirect without a Location header".into()))?;
    let scheme = from.scheme_str().unwrap_or("https");
    let authority = from.authority().map(|a| a.as_str()).unwrap_or_default();
    let absolute = if loc.starts_with("http://") || loc.starts_with("https://") {
        loc.to_string()
    } else if let Some(rest) = loc.strip_prefix("//") {
        format!("{scheme}://{rest}")
    } else if loc.starts_with('/') {
        format!("{scheme}://{authority}{loc}")
    } else {
        let path = from.path();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        format!("{scheme}://{authority}{dir}{loc}")
    };
    parse_url(&absolute)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

fn meta_from(headers: &HeaderMap, location: String) -> Result<FileMeta, HttpError> {
    let commit = header(headers, "x-repo-commit").ok_or_else(|| {
        HttpError::Protocol("no X-Repo-Commit header (is HF_ENDPOINT a Hugging Face Hub?)".into())
    })?;
    let etag = header(headers, "x-linked-etag")
        .or_else(|| header(headers, "etag"))
        .ok_or_else(|| HttpError::Protocol("no ETag header".into()))?;
    let size = header(headers, "x-linked-size")
        .or_else(|| header(headers, "content-length"))
        .and_then(|v| v.parse().ok());
    Ok(FileMeta {
        commit: commit.to_string(),
        etag: etag.to_string(),
        size,
        location,
    })
}

fn is_html(headers: &HeaderMap) -> bool {
    header(headers, "content-type").is_some_and(|t| t.to_ascii_lowercase().starts_with("text/html"))
}

/// A transport error in words, without the URL.
fn transport(e: ureq::Error) -> HttpError {
    HttpError::Transport(transport_words(&e, "HF_HUB_DOWNLOAD_TIMEOUT"))
}

/// A ureq transport error in words, without the URL (which may carry a token or a path);
/// `timeouts` names the settings a timeout is governed by. Shared with `probe`'s client.
pub fn transport_words(e: &ureq::Error, timeouts: &str) -> String {
    match e {
        ureq::Error::Timeout(t) => format!("timed out ({t}; {timeouts})"),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::Io(io) => io_words(io, timeouts),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::Protocol(p) => format!("HTTP protocol error ({p})"),
        ureq::Error::Tls(t) => format!("TLS error ({t})"),
        ureq::Error::StatusCode(c) => format!("HTTP {c}"),
        other => {
            let text = other.to_string();
            if text.contains("://") {
                "request failed".into()
            } else {
                text
            }
        }
    }
}

fn read_error(e: &std::io::Error) -> HttpError {
    // ureq reports its own timeouts through io::Error with the ureq error inside.
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>());
    match inner {
        Some(ureq::Error::Timeout(t)) => HttpError::Transport(format!(
            "timed out while downloading ({t}; HF_HUB_DOWNLOAD_TIMEOUT, KVAUDIT_HUB_BODY_TIMEOUT)"
        )),
        _ => HttpError::Transport(io_words(e, "HF_HUB_DOWNLOAD_TIMEOUT")),
    }
}

fn io_words(e: &std::io::Error, timeouts: &str) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => "connection refused".into(),
        ConnectionReset | ConnectionAborted | BrokenPipe => "connection lost".into(),
        TimedOut | WouldBlock => format!("timed out ({timeouts})"),
        UnexpectedEof => "the connection closed early".into(),
        _ => format!("network error ({})", e.kind()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_never_shown() {
        assert_eq!(
            redact("https://user:tok@hub.example/x"),
            "https://hub.example/x"
        );
        assert_eq!(redact("http://h:1/a@b"), "http://h:1/a@b");
        assert_eq!(redact("https://hub.example"), "https://hub.example");
        // A query or fragment may carry a token; a hostile password may hold `?` or `#`.
        assert_eq!(
            redact("https://hub.example/?token=hf_abc#x"),
            "https://hub.example/?[redacted]"
        );
        assert_eq!(
            redact("http://u:p?ss#w@h:1/v1?key=sk"),
            "http://h:1/v1?[redacted]"
        );
        assert_eq!(redact("not a url?k=v"), "not a url?[redacted]");
        let e = Endpoint::parse("http://u:secret@127.0.0.1:9/").unwrap();
        assert!(!e.shown.contains("secret"));
    }

    #[test]
    fn revisions_are_one_encoded_segment() {
        let e = Endpoint::parse("https://hub.example").unwrap();
        assert_eq!(
            e.resolve_url("O/m", "refs/pr/1", "tokenizer.json"),
            "https://hub.example/O/m/resolve/refs%2Fpr%2F1/tokenizer.json"
        );
    }

    #[test]
    fn redirects_resolve_against_the_answering_url() {
        let from: Uri = "http://a.example:8080/O/m/resolve/main/t.json"
            .parse()
            .unwrap();
        let mut h = HeaderMap::new();
        let at = |h: &mut HeaderMap, v: &str| {
            h.insert("location", v.parse().unwrap());
            location(&from, h).unwrap().to_string()
        };
        assert_eq!(at(&mut h, "/x/y"), "http://a.example:8080/x/y");
        assert_eq!(at(&mut h, "z"), "http://a.example:8080/O/m/resolve/main/z");
        assert_eq!(at(&mut h, "//b.example/q"), "http://b.example/q");
        assert_eq!(at(&mut h, "https://c.example/q"), "https://c.example/q");
        assert!(location(&from, &HeaderMap::new()).is_err());
    }

    #[test]
    fn the_token_belongs_to_one_origin() {
        let c = Client::new(
            Endpoint::parse("http://127.0.0.1:5000").unwrap(),
            Some("t".into()),
            Limits::default(),
        );
        let auth = |u: &str| c.auth_for(&u.parse().unwrap());
        assert!(auth("http://127.0.0.1:5000/x").is_some());
        assert!(auth("http://127.0.0.1:5001/x").is_none());
        assert!(auth("http://localhost:5000/x").is_none());
        assert!(auth("https://127.0.0.1:5000/x").is_none());
    }
}
