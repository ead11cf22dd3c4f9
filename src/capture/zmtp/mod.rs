//! A bounded ZMTP 3.x peer: what capture needs of ZeroMQ and no more (NULL security; SUB,
//! connecting or bound, and DEALER; TCP and IPC), with every length a peer announces checked
//! before anything is allocated for it.
//!
//! The zeromq crate this replaces cannot be bounded: its codec reserves whatever a frame
//! header claims (2^40 bytes aborted capture) and collects MORE frames without limit, and it
//! has no option for either. Here the framing is a pure, synchronous decoder
//! ([`Decoder`]: bytes in, greeting/commands/messages out) that a fuzz target drives, under
//! a thin tokio layer ([`conn`]) for the sockets, the handshake and its timeout.

mod codec;
pub(super) mod conn;
pub(crate) mod endpoint;

pub use codec::{
    Command, Decoder, Event, GREETING_LEN, Greeting, Limits, Property, command, greeting, message,
    peer_ready, pong_for, properties, ready,
};

/// Why a peer was given up on. Every kind but `Closed` means the peer broke the protocol or
/// a bound, and its connection was closed by us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// Not a NULL-mechanism ZMTP 3 greeting.
    Greeting,
    /// No valid READY, the wrong socket type, or an ERROR command.
    Handshake,
    /// Greeting and READY did not arrive within the handshake timeout.
    HandshakeTimeout,
    OversizedCommand,
    OversizedMessage,
    TooManyFrames,
    /// Frames out of order (a command inside a message, a command with MORE).
    Protocol,
    /// The connection failed or ended in the middle of a frame or message.
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct ZmtpError {
    pub kind: ErrorKind,
    pub detail: String,
}

impl ZmtpError {
    pub fn new(kind: ErrorKind, detail: String) -> ZmtpError {
        ZmtpError { kind, detail }
    }
}

/// Bytes a peer sent, for a detail line: printable ASCII as is, the rest escaped, and at most
/// 32 of them (a detail ends up in the summary and on a terminal).
pub(crate) fn shown(bytes: &[u8]) -> String {
    let bytes = match bytes.iter().rposition(|&b| b != 0) {
        Some(i) => &bytes[..=i],
        None => &[],
    };
    let mut s = String::from("\"");
    for &b in bytes.iter().take(32) {
        if b.is_ascii_graphic() || b == b' ' {
            if b == b'"' || b == b'\\' {
                s.push('\\');
            }
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    if bytes.len() > 32 {
        s.push_str("...");
    }
    s.push('"');
    s
}
