use std::io::{IsTerminal, Write};

use anyhow::{Context, Result};

use super::Outcome;
use super::settings::{CaptureSettings, style};
use crate::capture::{Status, capture};
use crate::cli::CaptureArgs;
use crate::report::capture::CaptureOutput;
use crate::report::export;

pub fn run(args: &CaptureArgs, out: &mut dyn Write) -> Result<Outcome> {
    let settings = CaptureSettings::from_args(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the capture runtime")?;
    let tty = std::io::stderr().is_terminal();
    let status = |status: Status<'_>| {
        let p = match status {
            // Unconditionally: whoever starts publishers against port 0 needs the port.
            Status::Bound(addr) => {
                return super::terminal::stderr_line(&format!("listening on {addr}"));
            }
            Status::Progress(_) if !tty => return,
            Status::Progress(p) => p,
        };
        let skipped: Vec<String> = p.skipped.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let skipped = if skipped.is_empty() {
            String::new()
        } else {
            format!(", skipped: {}", skipped.join(", "))
        };
        // Only numbers and kvaudit's own skip reasons: nothing here needs escaping.
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[2K{:>5.0}s  {} messages, {} events, {} gaps, {} malformed{skipped}",
            p.elapsed.as_secs_f64(),
            p.messages,
            p.events,
            p.gaps,
            p.malformed
        );
    };
    let summary = runtime.block_on(capture(settings.live, status, stop_signal()))?;
    if tty {
        let _ = writeln!(std::io::stderr());
    }
    let out_path = summary.out.display().to_string();
    let text = export(
        &CaptureOutput::new(&summary, &out_path),
        settings.format,
        &style(false),
    )?;
    out.write_all(text.as_bytes())?;
    // A dropped publisher lost messages the file does not hold, as a gap does.
    Ok(if summary.unrecovered_gaps() || summary.peers_dropped > 0 {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}

/// Ctrl-C or SIGTERM: stop cleanly (the file already ends on a whole frame).
async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                return tokio::signal::ctrl_c()
                    .await
                    .map_or("interrupt", |_| "interrupt");
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "interrupt",
            _ = term.recv() => "terminated",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "interrupt"
    }
}
