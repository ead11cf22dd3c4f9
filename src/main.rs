use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use kvaudit::cli::{Cli, Command};
use kvaudit::commands::{self, Outcome, terminal};

// The audit allocates many small, short-lived token and text buffers per conversation on
// every worker; mimalloc's thread-local free lists serve them faster than glibc's malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Past a file-size limit (`ulimit -f`), the default SIGXFSZ kills the process before it
    // can remove its temporary file or say why; ignored, the write fails with EFBIG like a
    // full disk, and the output's previous bytes stay as they were.
    #[cfg(unix)]
    // SAFETY: sets a signal's disposition to "ignore" before any thread is started.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A value a flag's own parser refused (a block size out of range, a size without a
        // unit) is one line, as every other bad input is; clap would add a hint after it.
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            let text = e.render().to_string();
            terminal::stderr_line(text.lines().next().unwrap_or("error: invalid value"));
            return ExitCode::from(2);
        }
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            // --help or --version into a full disk is an error; into a closed pipe it is not.
            return match e.print() {
                Err(io) if e.use_stderr() || io.kind() == std::io::ErrorKind::BrokenPipe => {
                    ExitCode::from(code)
                }
                Err(io) => {
                    terminal::stderr_line(&format!("error: cannot write the text: {io}"));
                    ExitCode::from(2)
                }
                Ok(()) => ExitCode::from(code),
            };
        }
    };
    terminal::set_secrets(secrets(&cli));
    // Decided here once rather than by owo-colors' own detection, which treats an empty
    // NO_COLOR as set.
    let colour = commands::color_wanted(cli.color, std::io::stdout().is_terminal(), |k| {
        std::env::var(k).ok()
    });
    owo_colors::set_override(colour);
    let stdout = std::io::stdout();
    let mut out: Box<dyn Write> = if cli.quiet {
        Box::new(std::io::sink())
    } else {
        Box::new(terminal::Safe::new(stdout.lock(), colour))
    };
    let result = match &cli.command {
        Command::DiffTurns(args) => commands::diff_turns::run(args, &mut out),
        Command::Fetch(args) => commands::fetch::run(args, &mut out),
        Command::Replay(args) => commands::replay::run(args, &mut out),
        Command::Keys(args) => commands::keys::run(args, &mut out),
        Command::Render(args) => commands::render::run(args, &mut out),
        Command::Capture(args) => commands::capture::run(args, &mut out),
        Command::Watch(args) => commands::watch::run(args, &mut out),
        Command::Check(args) => commands::check::run(args, &mut out),
        Command::Corpus(args) => commands::corpus::run(args, &mut out),
        Command::Merge(args) => commands::merge::run(args, &mut out),
        Command::Probe(args) => commands::probe::run(args, &mut out),
        Command::Init(args) => commands::init::run(args, &mut out),
        Command::Completions(args) => commands::completions::run(args, &mut out),
    };
    let flushed = out.flush();
    let closed = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
    let result = match (result, flushed.as_ref()) {
        // The report did not reach stdout (a full disk): the run failed, whatever it found.
        (Ok(_), Err(e)) if !closed(e) => Err(anyhow::anyhow!("{e}")),
        (result, _) => result,
    };
    match result {
        Ok(Outcome::Clean) => ExitCode::SUCCESS,
        Ok(Outcome::Findings) => ExitCode::from(1),
        Err(e)
            if is_broken_pipe(&e)
                || flushed
                    .as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            let line = kvaudit::error::chain_text(&e);
            terminal::stderr_line(&format!("error: {line}"));
            ExitCode::from(2)
        }
    }
}

/// What must never be printed: the tokens and keys kvaudit sends, and every value of an
/// extra header (routers take keys in headers of their own names).
fn secrets(cli: &Cli) -> Vec<String> {
    let mut v: Vec<String> = ["HF_TOKEN", "OPENAI_API_KEY"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .collect();
    if let Command::Probe(args) = &cli.command {
        v.extend(args.api_key.iter().cloned());
        v.extend(
            args.header
                .iter()
                .filter_map(|h| h.split_once(':'))
                .map(|(_, value)| value.trim().to_string()),
        );
    }
    v
}

/// A closed pipe on standard output (`kvaudit ... | head`) is not an error: the reader has
/// what it wanted. One on a file kvaudit was told to write (a FIFO given to
/// `--per-transition`) is lost output, and its error carries an `OutputError`.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    let mut pipe = false;
    for cause in e.chain() {
        if kvaudit::output::is_output_error(cause) {
            return false;
        }
        pipe |= cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe);
    }
    pipe
}
