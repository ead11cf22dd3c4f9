//! Which multipart messages are KV-event messages: three frames, an 8-byte sequence, a topic
//! and payload `replay` can read back, the payload one msgpack value.

use bytes::Bytes;

use crate::events::frames::MAX_TOPIC;
use crate::events::msgpack::value_len;

/// Why a multipart message was not captured, or a publisher's connection was given up on.
/// Counted per kind, not listed: a publisher that sends nothing but bad messages must not
/// grow the summary with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MalformedKind {
    FrameCount,
    SequenceFrame,
    OversizedTopic,
    OversizedPayload,
    NotMsgpack,
    /// The connection failed or ended inside a message (it is reconnected).
    SocketClosed,
    // The kinds below drop the publisher's connection (see `drops_peer`).
    /// A message larger than `--max-message-size`, refused at its frame header.
    OversizedMessage,
    TooManyFrames,
    OversizedCommand,
    /// Not a NULL-mechanism ZMTP 3 greeting, no valid READY, or not a publisher.
    HandshakeFailed,
    HandshakeTimeout,
    /// Frames out of order: a command inside a message.
    ProtocolError,
    /// `--bind` had as many publishers connected as it serves.
    TooManyPeers,
}

impl MalformedKind {
    /// The JSON key.
    pub fn name(self) -> &'static str {
        match self {
            MalformedKind::FrameCount => "frame_count",
            MalformedKind::SequenceFrame => "sequence_frame",
            MalformedKind::OversizedTopic => "oversized_topic",
            MalformedKind::OversizedPayload => "oversized_payload",
            MalformedKind::NotMsgpack => "not_msgpack",
            MalformedKind::SocketClosed => "socket_closed",
            MalformedKind::OversizedMessage => "oversized_message",
            MalformedKind::TooManyFrames => "too_many_frames",
            MalformedKind::OversizedCommand => "oversized_command",
            MalformedKind::HandshakeFailed => "handshake_failed",
            MalformedKind::HandshakeTimeout => "handshake_timeout",
            MalformedKind::ProtocolError => "protocol_error",
            MalformedKind::TooManyPeers => "too_many_peers",
        }
    }

    /// The publisher broke a bound or the protocol, and its connection was closed by capture
    /// (a connected publisher is connected to again; a bound one may come back).
    pub fn drops_peer(self) -> bool {
        !matches!(
            self,
            MalformedKind::FrameCount
                | MalformedKind::SequenceFrame
                | MalformedKind::OversizedTopic
                | MalformedKind::OversizedPayload
                | MalformedKind::NotMsgpack
                | MalformedKind::SocketClosed
        )
    }

    pub fn describe(self) -> &'static str {
        match self {
            MalformedKind::FrameCount => "wrong frame count",
            MalformedKind::SequenceFrame => "bad sequence frame",
            MalformedKind::OversizedTopic => "topic too long",
            MalformedKind::OversizedPayload => "payload too large",
            MalformedKind::NotMsgpack => "payload not msgpack",
            MalformedKind::SocketClosed => "socket closed",
            MalformedKind::OversizedMessage => "message over --max-message-size",
            MalformedKind::TooManyFrames => "message of too many frames",
            MalformedKind::OversizedCommand => "ZMTP command too large",
            MalformedKind::HandshakeFailed => "ZMTP handshake failed",
            MalformedKind::HandshakeTimeout => "ZMTP handshake timed out",
            MalformedKind::ProtocolError => "ZMTP protocol error",
            MalformedKind::TooManyPeers => "too many publishers connected",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub kind: MalformedKind,
    pub detail: String,
}

impl Malformed {
    pub(super) fn new(kind: MalformedKind, detail: String) -> Malformed {
        Malformed { kind, detail }
    }
}

/// Why a multipart message is not a KV-event message; `max_payload` is the largest payload
/// accepted (MAX_PAYLOAD on the command line, so that `replay` reads every frame written).
pub fn validate(frames: &[Bytes], max_payload: usize) -> Result<u64, Malformed> {
    if frames.len() != 3 {
        return Err(Malformed::new(
            MalformedKind::FrameCount,
            format!(
                "{} frames (expected topic, sequence, payload)",
                frames.len()
            ),
        ));
    }
    let seq = &frames[1];
    if seq.len() != 8 {
        return Err(Malformed::new(
            MalformedKind::SequenceFrame,
            format!("{}-byte sequence frame (expected 8)", seq.len()),
        ));
    }
    if frames[0].len() > MAX_TOPIC {
        return Err(Malformed::new(
            MalformedKind::OversizedTopic,
            format!("{}-byte topic (at most {MAX_TOPIC})", frames[0].len()),
        ));
    }
    let payload = &frames[2];
    // Before the msgpack check, which would walk the whole oversized payload.
    if payload.len() > max_payload {
        return Err(Malformed::new(
            MalformedKind::OversizedPayload,
            format!("{}-byte payload (at most {max_payload})", payload.len()),
        ));
    }
    match value_len(payload) {
        Ok(Some(n)) if n == payload.len() => {}
        _ => {
            return Err(Malformed::new(
                MalformedKind::NotMsgpack,
                "payload is not one msgpack value".into(),
            ));
        }
    }
    Ok(u64::from_be_bytes([
        seq[0], seq[1], seq[2], seq[3], seq[4], seq[5], seq[6], seq[7],
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_validation() {
        let seq = Bytes::copy_from_slice(&7u64.to_be_bytes());
        let ok = [
            Bytes::from_static(b"kv@p@m"),
            seq.clone(),
            Bytes::from_static(&[0x93, 0x00, 0x90, 0x00]),
        ];
        let kind = |frames: &[Bytes], max: usize| validate(frames, max).unwrap_err().kind;
        assert_eq!(validate(&ok, 4), Ok(7));
        assert!(
            validate(&ok[..2], 4)
                .unwrap_err()
                .detail
                .contains("2 frames")
        );
        assert_eq!(kind(&ok[..2], 4), MalformedKind::FrameCount);
        let short = [
            ok[0].clone(),
            Bytes::from_static(&[0, 0, 0, 1]),
            ok[2].clone(),
        ];
        let e = validate(&short, 4).unwrap_err();
        assert_eq!(e.kind, MalformedKind::SequenceFrame);
        assert!(e.detail.contains("4-byte sequence"));
        let bad = [ok[0].clone(), seq.clone(), Bytes::from_static(b"\xc1junk")];
        assert_eq!(kind(&bad, 1 << 20), MalformedKind::NotMsgpack);
        // The limit is inclusive, and checked before the payload is read as msgpack.
        assert_eq!(kind(&ok, 3), MalformedKind::OversizedPayload);
        assert_eq!(kind(&bad, 3), MalformedKind::OversizedPayload);
        let long = [
            Bytes::from(vec![b't'; MAX_TOPIC + 1]),
            seq.clone(),
            ok[2].clone(),
        ];
        assert_eq!(kind(&long, 4), MalformedKind::OversizedTopic);
        let longest = [Bytes::from(vec![b't'; MAX_TOPIC]), seq, ok[2].clone()];
        assert_eq!(validate(&longest, 4), Ok(7));
    }
}
