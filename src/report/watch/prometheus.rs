//! The watch counters as Prometheus text exposition. Every label value comes from a flag
//! (model, pod) or a fixed set (cause, class, reason), never from a request.

use std::fmt::Write;

use super::WatchOutput;
use crate::report::{Exporter, Style, prometheus_label as label};

pub struct Prometheus;

impl Exporter<WatchOutput<'_>> for Prometheus {
    fn export(&self, out: &WatchOutput<'_>, _style: &Style) -> anyhow::Result<String> {
        Ok(to_prometheus(out))
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn to_prometheus(o: &WatchOutput) -> String {
    let t = o.totals;
    let model = label(o.model);
    let mut out = String::new();
    header(
        &mut out,
        "kvaudit_watch_requests_total",
        "counter",
        "Requests attributed, by the pod that served them.",
    );
    for (pod, p) in &t.pods {
        let _ = writeln!(
            out,
            "kvaudit_watch_requests_total{{model=\"{model}\",pod=\"{}\"}} {}",
            label(pod),
            p.requests
        );
    }
    header(
        &mut out,
        "kvaudit_watch_prompt_tokens_total",
        "counter",
        "Prompt tokens by cause (reused, misrouted, evicted, block_tail, rewritten, new) and serving pod; the causes of a pod sum to its prompt tokens.",
    );
    for (pod, p) in &t.pods {
        for (cause, v) in p.causes.named() {
            let _ = writeln!(
                out,
                "kvaudit_watch_prompt_tokens_total{{model=\"{model}\",pod=\"{}\",cause=\"{cause}\"}} {v}",
                label(pod)
            );
        }
    }
    header(
        &mut out,
        "kvaudit_watch_rewritten_tokens_total",
        "counter",
        "Rewritten prompt tokens by the template's rewrite class.",
    );
    for (class, v) in &t.rewrite_classes {
        let _ = writeln!(
            out,
            "kvaudit_watch_rewritten_tokens_total{{model=\"{model}\",class=\"{class}\"}} {v}"
        );
    }
    header(
        &mut out,
        "kvaudit_watch_disagreement_tokens_total",
        "counter",
        "How far the engine's cached_tokens was from what its events said the pod held, summed over requests.",
    );
    for (pod, p) in &t.pods {
        let _ = writeln!(
            out,
            "kvaudit_watch_disagreement_tokens_total{{model=\"{model}\",pod=\"{}\"}} {}",
            label(pod),
            p.causes.disagreement
        );
    }
    header(
        &mut out,
        "kvaudit_watch_unattributed_requests_total",
        "counter",
        "Requests not attributed, by reason.",
    );
    for (why, v) in &t.unattributed {
        let _ = writeln!(
            out,
            "kvaudit_watch_unattributed_requests_total{{model=\"{model}\",reason=\"{}\"}} {v}",
            why.as_str()
        );
    }
    header(
        &mut out,
        "kvaudit_watch_turns_total",
        "counter",
        "Requests by how they linked to the conversation's request before them (first, linked, unseen).",
    );
    for (link, v) in &o.counts.links {
        let _ = writeln!(
            out,
            "kvaudit_watch_turns_total{{model=\"{model}\",link=\"{}\"}} {v}",
            link.as_str()
        );
    }
    header(
        &mut out,
        "kvaudit_watch_event_batches_total",
        "counter",
        "KV event batches applied to each pod's view.",
    );
    for (pod, p) in &t.pods {
        let _ = writeln!(
            out,
            "kvaudit_watch_event_batches_total{{pod=\"{}\"}} {}",
            label(pod),
            p.batches
        );
    }
    header(
        &mut out,
        "kvaudit_watch_events_unapplied_total",
        "counter",
        "Events not applied to a pod's view, by reason (malformed: a message that does not decode).",
    );
    for (pod, p) in &t.pods {
        for (why, v) in &p.unapplied {
            let _ = writeln!(
                out,
                "kvaudit_watch_events_unapplied_total{{pod=\"{}\",reason=\"{why}\"}} {v}",
                label(pod)
            );
        }
        if let Some(m) = o.counts.malformed.get(pod) {
            let _ = writeln!(
                out,
                "kvaudit_watch_events_unapplied_total{{pod=\"{}\",reason=\"malformed\"}} {m}",
                label(pod)
            );
        }
    }
    header(
        &mut out,
        "kvaudit_watch_pod_blocks",
        "gauge",
        "KV blocks each pod holds now, as its events say.",
    );
    for (pod, p) in &t.pods {
        let _ = writeln!(
            out,
            "kvaudit_watch_pod_blocks{{pod=\"{}\"}} {}",
            label(pod),
            p.blocks
        );
    }
    header(
        &mut out,
        "kvaudit_watch_pod_stale",
        "gauge",
        "1 while a pod's view is incomplete (events lost or past its capacity), else 0.",
    );
    for (pod, p) in &t.pods {
        let _ = writeln!(
            out,
            "kvaudit_watch_pod_stale{{pod=\"{}\"}} {}",
            label(pod),
            u8::from(p.stale.is_some())
        );
    }
    out
}
