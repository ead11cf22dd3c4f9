use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use super::Outcome;
use super::replay::replay_options;
use crate::capture::{LiveOptions, Progress, capture};
use crate::cli::{CaptureArgs, OutputFormat};
use crate::events::capture::MAX_PAYLOAD;
use crate::report::capture::{to_human, to_json};

pub fn run(args: &CaptureArgs, out: &mut dyn Write) -> Result<Outcome> {
    let duration =
        |flag: &str, v: &str| parse_duration(v).map_err(|why| anyhow!("{flag} {v:?}: {why}"));
    let emulation = replay_options(&args.emulation, true, "pod-0")?;
    let engine = emulation.engine;
    let opts = LiveOptions {
        endpoints: args.endpoint.clone(),
        replay_endpoints: args.replay_endpoint.clone(),
        bind: args.bind.clone(),
        topic: args.topic.clone(),
        out: args.out.clone(),
        max_messages: args.max_messages,
        duration: args
            .duration
            .as_deref()
            .map(|d| duration("--duration", d))
            .transpose()?,
        connect_timeout: duration("--connect-timeout", &args.connect_timeout)?,
        replay_timeout: duration("--replay-timeout", &args.replay_timeout)?,
        max_payload: MAX_PAYLOAD,
        live_replay: args.live_replay.then_some(emulation),
        engine,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the capture runtime")?;
    let tty = std::io::stderr().is_terminal();
    let status = |p: &Progress| {
        if !tty {
            return;
        }
        let skipped: Vec<String> = p.skipped.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let skipped = if skipped.is_empty() {
            String::new()
        } else {
            format!(", skipped: {}", skipped.join(", "))
        };
        eprint!(
            "\r\x1b[2K{:>5.0}s  {} messages, {} events, {} gaps, {} malformed{skipped}",
            p.elapsed.as_secs_f64(),
            p.messages,
            p.events,
            p.gaps,
            p.malformed
        );
    };
    let summary = runtime.block_on(capture(opts, status, stop_signal()))?;
    if tty {
        eprintln!();
    }
    let text = match args.format {
        OutputFormat::Json => format!("{}\n", serde_json::to_string_pretty(&to_json(&summary))?),
        OutputFormat::Human => to_human(&summary),
    };
    out.write_all(text.as_bytes())?;
    Ok(if summary.unrecovered_gaps() {
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

/// The longest duration a flag takes: tokio's timers reach about two years, and no capture
/// or timeout needs more than one.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// `90s`, `2m`, `1h`, `500ms`, or plain seconds; more than zero and at most a year.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = t.split_at(
        t.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len()),
    );
    let syntax = || "expected a duration like 90s, 5m or 500ms".to_string();
    let v: f64 = num.parse().map_err(|_| syntax())?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(syntax()),
    };
    // Compared as f64 before converting: Duration::from_secs_f64 panics past u64 seconds.
    if !secs.is_finite() || secs > MAX_DURATION.as_secs_f64() {
        return Err("longer than a year (365 days is the most)".into());
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err("must be more than zero".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("expected a duration")
        );
        assert!(parse_duration("0s").unwrap_err().contains("more than zero"));
        assert!(
            parse_duration("0.0000000001s")
                .unwrap_err()
                .contains("more than zero")
        );
        // Each of these panicked in Duration::from_secs_f64.
        for big in ["99999999999999999999s", "8761h", "1e400", &"9".repeat(400)] {
            let err = parse_duration(big).unwrap_err();
            assert!(
                err.contains("longer than a year") || err.contains("expected a duration"),
                "{big}: {err}"
            );
        }
        assert!(
            parse_duration("99999999999999999999s")
                .unwrap_err()
                .contains("year")
        );
    }
}
