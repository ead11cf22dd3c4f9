use std::io::Write;

use anyhow::Result;

use super::Outcome;
use super::settings::style;
use crate::cli::MergeArgs;
use crate::corpus::partial;
use crate::{output, report};

pub fn run(args: &MergeArgs, out: &mut dyn Write) -> Result<Outcome> {
    output::check_outputs(args.partials.iter().cloned(), args.html.iter())?;
    let report = partial::merge_files(&args.partials)?;
    // As one run: nothing audited is an error, after the report shows what was skipped.
    let nothing =
        (report.tally.conversations == 0).then(|| super::corpus::nothing_audited(&report));
    if nothing.is_none()
        && let Some(path) = &args.html
    {
        let text = report::export(&report, report::Format::Html, &style(false))?;
        output::write(path, text.as_bytes())?;
    }
    super::corpus::print_report(&report, args.format.into(), out, nothing)
}
