//! The pass-through proxy: every byte from the client goes to `--upstream` and every byte
//! back goes to the client, in order and unchanged; a copy of each direction is followed
//! ([`super::http::Follower`]) to see the chat requests and their answers. What is seen is
//! offered to the monitor without waiting: a full queue, a message watch cannot follow or a
//! monitor that failed costs an observation (counted), never a byte of the exchange.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::http::{Follower, Message, Side};
use super::monitor::RequestId;

/// What the proxy saw, for the monitor.
#[derive(Debug)]
pub enum Seen {
    /// A chat request whole: its id and body.
    Request(RequestId, Vec<u8>),
    /// The response to request `id`.
    Response(RequestId, Message),
    /// Request `id` will get no response the proxy can read.
    Abandoned(RequestId),
    /// Something the proxy could not follow, by reason.
    Unfollowed(&'static str),
}

/// Where the proxy offers what it sees; `offer` never blocks.
pub trait Sink: Send + Sync + 'static {
    fn offer(&self, seen: Seen);
}

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// `host:port` of the upstream, as connected to; `None`: mirror mode, where the requests
    /// are copies (a gateway's shadow traffic), each answered at once and forwarded nowhere.
    pub upstream: Option<String>,
    /// The response header naming the pod that served a request.
    pub pod_header: Option<String>,
    /// The longest request or response body read (longer ones pass, unread).
    pub max_body: usize,
    pub connect_timeout: Duration,
}

/// Read buffer per direction of a connection.
const BUFFER: usize = 64 << 10;

/// Accepts clients until the listener fails or `stop` fires; each connection runs until
/// either side closes. Returns when every connection is done or `drain` has passed since
/// `stop`.
pub async fn serve(
    listener: TcpListener,
    settings: Arc<ProxySettings>,
    sink: Arc<dyn Sink>,
    stop: impl std::future::Future<Output = ()>,
    drain: Duration,
) {
    let ids = Arc::new(AtomicU64::new(0));
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else {
                    // Out of file descriptors, most likely: let some close.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let _ = client.set_nodelay(true);
                connections.spawn(connection(client, settings.clone(), sink.clone(), ids.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = &mut stop => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
}

/// Requests sent on one connection and not answered yet, oldest first (the id of a chat
/// request), and whether each was a HEAD, for the response side's follower to take.
#[derive(Default)]
struct Flight {
    ids: VecDeque<Option<RequestId>>,
    heads: VecDeque<bool>,
    /// Responses that came before their request was whole (a 413 or 401 sent while the body
    /// was still coming): the next requests to complete are already answered.
    early: u64,
    /// The oldest requests given up on (past [`MAX_IN_FLIGHT`]) whose answers are still to
    /// come: those answers belong to no request waiting.
    given_up: u64,
    /// The response side can no longer be followed: no later request will be answered.
    deaf: bool,
}

/// Requests one connection may have unanswered before the oldest is given up on.
const MAX_IN_FLIGHT: usize = 1024;

type InFlight = Arc<Mutex<Flight>>;

async fn connection(
    client: TcpStream,
    settings: Arc<ProxySettings>,
    sink: Arc<dyn Sink>,
    ids: Arc<AtomicU64>,
) {
    let Some(to) = &settings.upstream else {
        return mirrored(client, &settings, &sink, &ids).await;
    };
    let upstream =
        match tokio::time::timeout(settings.connect_timeout, TcpStream::connect(to)).await {
            Ok(Ok(u)) => u,
            _ => {
                // As a TCP proxy does: the client sees the connection close.
                sink.offer(Seen::Unfollowed("upstream_unreachable"));
                return;
            }
        };
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let in_flight: InFlight = Arc::default();
    let up = pump(
        client_read,
        upstream_write,
        Side::Request,
        settings.clone(),
        sink.clone(),
        in_flight.clone(),
        ids,
    );
    let down = pump(
        upstream_read,
        client_write,
        Side::Response,
        settings,
        sink.clone(),
        in_flight.clone(),
        Arc::default(),
    );
    tokio::join!(up, down);
    let left: Vec<RequestId> = match in_flight.lock() {
        Ok(mut f) => f.ids.drain(..).flatten().collect(),
        Err(_) => Vec::new(),
    };
    for id in left {
        sink.offer(Seen::Abandoned(id));
    }
}

/// Copies one direction until its reader ends, then closes the writer's side. A request's
/// bytes are followed before they are written on, so a request is in flight before any of
/// its response can come back; a response's are written on first.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    side: Side,
    settings: Arc<ProxySettings>,
    sink: Arc<dyn Sink>,
    in_flight: InFlight,
    ids: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; BUFFER];
    let mut follower = Follower::new(side, settings.max_body);
    let mut done = Vec::new();
    let mut lost_said = false;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if side == Side::Response && to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        if follower.lost().is_none() {
            if side == Side::Response
                && let Ok(mut f) = in_flight.lock()
            {
                for head in f.heads.drain(..) {
                    follower.request_sent(head);
                }
            }
            follower.feed(&buf[..n], settings.pod_header.as_deref(), &mut done);
            deliver(&mut done, side, &sink, &in_flight, &ids);
            if let Some(l) = follower.lost()
                && !lost_said
            {
                lost_said = true;
                sink.offer(Seen::Unfollowed(l.as_str()));
                if side == Side::Response
                    && let Ok(mut f) = in_flight.lock()
                {
                    // No answer will be read again: give up on every request waiting, and
                    // on those to come.
                    f.deaf = true;
                    f.heads.clear();
                    for id in f.ids.drain(..).flatten() {
                        sink.offer(Seen::Abandoned(id));
                    }
                }
            }
        }
        if side == Side::Request && to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    follower.end(&mut done);
    deliver(&mut done, side, &sink, &in_flight, &ids);
    let _ = to.shutdown().await;
}

fn deliver(
    done: &mut Vec<Message>,
    side: Side,
    sink: &Arc<dyn Sink>,
    in_flight: &InFlight,
    ids: &AtomicU64,
) {
    for message in done.drain(..) {
        match side {
            Side::Request => {
                let id = message
                    .body
                    .as_ref()
                    .map(|_| ids.fetch_add(1, Ordering::Relaxed) + 1);
                let Ok(mut f) = in_flight.lock() else {
                    continue;
                };
                let answered = if f.deaf {
                    true
                } else if f.early > 0 {
                    f.early -= 1;
                    true
                } else {
                    f.ids.push_back(id);
                    f.heads.push_back(message.method == "HEAD");
                    if f.ids.len() > MAX_IN_FLIGHT
                        && let Some(oldest) = f.ids.pop_front()
                    {
                        f.given_up += 1;
                        if let Some(oldest) = oldest {
                            sink.offer(Seen::Abandoned(oldest));
                        }
                    }
                    false
                };
                drop(f);
                match (id, message.body) {
                    (Some(id), Some(body)) => {
                        sink.offer(Seen::Request(id, body));
                        if answered {
                            // Its answer went by unread (or will never be read).
                            sink.offer(Seen::Abandoned(id));
                        }
                    }
                    _ if message.over => sink.offer(Seen::Unfollowed("request_too_large")),
                    _ => {}
                }
            }
            Side::Response => {
                let Ok(mut f) = in_flight.lock() else {
                    continue;
                };
                // Answers come in the order of the requests: the oldest waiting is this one's.
                let id = if f.given_up > 0 {
                    f.given_up -= 1;
                    None
                } else {
                    match f.ids.pop_front() {
                        Some(id) => id,
                        None => {
                            f.early += 1;
                            None
                        }
                    }
                };
                drop(f);
                if let Some(id) = id {
                    sink.offer(Seen::Response(id, message));
                }
            }
        }
    }
}

/// What a mirror answers every request: the copy's answer goes nowhere.
const MIRROR_ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";

/// Mirror mode: each request read, offered with an answer that names nothing (the pod comes
/// from the events; the engine's usage is not seen), and answered at once.
async fn mirrored(
    client: TcpStream,
    settings: &ProxySettings,
    sink: &Arc<dyn Sink>,
    ids: &AtomicU64,
) {
    let (mut from, mut to) = client.into_split();
    let mut buf = vec![0u8; BUFFER];
    let mut follower = Follower::new(Side::Request, settings.max_body);
    let mut done = Vec::new();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        follower.feed(&buf[..n], None, &mut done);
        for message in done.drain(..) {
            match message.body {
                Some(body) => {
                    let id = ids.fetch_add(1, Ordering::Relaxed) + 1;
                    sink.offer(Seen::Request(id, body));
                    let answered = Message {
                        status: 200,
                        ..Message::default()
                    };
                    sink.offer(Seen::Response(id, answered));
                }
                None if message.over => sink.offer(Seen::Unfollowed("request_too_large")),
                None => {}
            }
            if to.write_all(MIRROR_ANSWER).await.is_err() {
                return;
            }
        }
        if let Some(l) = follower.lost() {
            // Not HTTP any more: nothing to answer.
            sink.offer(Seen::Unfollowed(l.as_str()));
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Said(Mutex<Vec<String>>);

    impl Sink for Said {
        fn offer(&self, seen: Seen) {
            let said = match seen {
                Seen::Request(id, _) => format!("request {id}"),
                Seen::Response(id, m) => format!("response {id} {}", m.status),
                Seen::Abandoned(id) => format!("abandoned {id}"),
                Seen::Unfollowed(why) => format!("unfollowed {why}"),
            };
            self.0.lock().unwrap().push(said);
        }
    }

    fn chat() -> Message {
        Message {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            body: Some(b"{}".to_vec()),
            ..Message::default()
        }
    }

    fn answer(status: u16) -> Message {
        Message {
            status,
            ..Message::default()
        }
    }

    /// The answers of one connection, each paired with its request in order, whatever came
    /// early or was given up on.
    fn pairs(events: &[(Side, Message)]) -> Vec<String> {
        let seen = Arc::new(Said::default());
        let sink: Arc<dyn Sink> = seen.clone();
        let (flight, ids) = (InFlight::default(), AtomicU64::new(0));
        for (side, m) in events {
            deliver(&mut vec![m.clone()], *side, &sink, &flight, &ids);
        }
        seen.0.lock().unwrap().clone()
    }

    #[test]
    fn an_answer_before_its_request_is_whole_is_that_requests() {
        // A 413 sent while request 1's body was coming: request 1 is answered by it (and given
        // up on: its answer was not a chat answer), request 2's answer is request 2's.
        let said = pairs(&[
            (Side::Response, answer(413)),
            (Side::Request, chat()),
            (Side::Request, chat()),
            (Side::Response, answer(200)),
        ]);
        assert_eq!(
            said,
            ["request 1", "abandoned 1", "request 2", "response 2 200"]
        );
    }

    #[test]
    fn past_the_bound_the_oldest_is_given_up_and_the_pairs_stay_in_order() {
        let mut events: Vec<(Side, Message)> = (0..MAX_IN_FLIGHT + 1)
            .map(|_| (Side::Request, chat()))
            .collect();
        // The answers to requests 1 and 2: the first belongs to request 1, given up on.
        events.push((Side::Response, answer(200)));
        events.push((Side::Response, answer(201)));
        let said = pairs(&events);
        // Request 1 is given up on when request 1,025 comes; the first answer is still its,
        // so the second is request 2's.
        assert_eq!(
            said[said.len() - 3..],
            [
                "abandoned 1".to_string(),
                format!("request {}", MAX_IN_FLIGHT + 1),
                "response 2 201".to_string(),
            ]
        );
    }
}
