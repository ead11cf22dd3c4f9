//! ZeroMQ endpoint strings (`tcp://host:port`, `ipc://path`) and the byte streams behind
//! them, connected or accepted.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
#[cfg(unix)]
use tokio::net::{UnixListener, UnixStream};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// Host as given (a name, an IPv4 address, an IPv6 address without brackets, or `*`).
    Tcp(String, u16),
    Ipc(std::path::PathBuf),
}

/// An endpoint string kvaudit cannot connect to or bind; each kind shows the text as given.
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum EndpointError {
    #[error("{0:?}: expected tcp://HOST:PORT")]
    NoPort(String),
    #[error("{0:?}: the port must be a number from 0 to 65535")]
    BadPort(String),
    #[error("{0:?}: no host")]
    NoHost(String),
    #[error("{0:?}: no path")]
    NoPath(String),
    #[error("{0:?}: expected tcp://HOST:PORT or ipc://PATH")]
    UnknownTransport(String),
}

impl Endpoint {
    pub(crate) fn parse(text: &str) -> Result<Endpoint, EndpointError> {
        let given = || text.to_string();
        if let Some(rest) = text.strip_prefix("tcp://") {
            let (host, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| EndpointError::NoPort(given()))?;
            let port: u16 = port.parse().map_err(|_| EndpointError::BadPort(given()))?;
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            if host.is_empty() {
                return Err(EndpointError::NoHost(given()));
            }
            return Ok(Endpoint::Tcp(host.to_string(), port));
        }
        if let Some(path) = text.strip_prefix("ipc://") {
            if path.is_empty() {
                return Err(EndpointError::NoPath(given()));
            }
            return Ok(Endpoint::Ipc(path.into()));
        }
        Err(EndpointError::UnknownTransport(given()))
    }
}

fn tcp_text(addr: std::net::SocketAddr) -> String {
    // SocketAddr's Display brackets IPv6 hosts already.
    format!("tcp://{addr}")
}

/// A connected byte stream of either transport.
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    pub(crate) async fn connect(ep: &Endpoint) -> io::Result<Stream> {
        match ep {
            Endpoint::Tcp(host, port) => {
                let s = TcpStream::connect((host.as_str(), *port)).await?;
                // Small messages go out at once, as libzmq does.
                let _ = s.set_nodelay(true);
                Ok(Stream::Tcp(s))
            }
            #[cfg(unix)]
            Endpoint::Ipc(path) => Ok(Stream::Unix(UnixStream::connect(path).await?)),
            #[cfg(not(unix))]
            Endpoint::Ipc(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "ipc:// endpoints need a Unix system",
            )),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A bound listening socket of either transport.
pub(crate) enum Listener {
    Tcp(TcpListener),
    #[cfg(unix)]
    Unix(UnixListener),
}

impl Listener {
    /// Bind `ep`; also returns the address as bound (with the port the system chose when 0
    /// was asked for), in endpoint form.
    pub(crate) async fn bind(ep: &Endpoint) -> io::Result<(Listener, String)> {
        match ep {
            Endpoint::Tcp(host, port) => {
                // libzmq's `*`: every interface.
                let host = if host == "*" {
                    "0.0.0.0"
                } else {
                    host.as_str()
                };
                let l = TcpListener::bind((host, *port)).await?;
                let addr = tcp_text(l.local_addr()?);
                Ok((Listener::Tcp(l), addr))
            }
            #[cfg(unix)]
            Endpoint::Ipc(path) => {
                let l = UnixListener::bind(path)?;
                Ok((Listener::Unix(l), format!("ipc://{}", path.display())))
            }
            #[cfg(not(unix))]
            Endpoint::Ipc(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "ipc:// endpoints need a Unix system",
            )),
        }
    }

    /// The next peer, with a name for it in the summary.
    pub(crate) async fn accept(&self) -> io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(l) => {
                let (s, addr) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok((Stream::Tcp(s), tcp_text(addr)))
            }
            #[cfg(unix)]
            Listener::Unix(l) => {
                let (s, _) = l.accept().await?;
                Ok((Stream::Unix(s), "ipc peer".to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        let tcp = |h: &str, p| Ok(Endpoint::Tcp(h.into(), p));
        assert_eq!(
            Endpoint::parse("tcp://127.0.0.1:5557"),
            tcp("127.0.0.1", 5557)
        );
        assert_eq!(Endpoint::parse("tcp://*:0"), tcp("*", 0));
        assert_eq!(Endpoint::parse("tcp://[::1]:5557"), tcp("::1", 5557));
        assert_eq!(
            Endpoint::parse("tcp://decode-0:5557"),
            tcp("decode-0", 5557)
        );
        assert_eq!(
            Endpoint::parse("ipc:///tmp/kv.sock"),
            Ok(Endpoint::Ipc("/tmp/kv.sock".into()))
        );
        for bad in [
            "tcp://host",
            "tcp://:5557",
            "tcp://host:65536",
            "tcp://host:x",
            "ipc://",
            "udp://x:1",
            "127.0.0.1:5557",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
