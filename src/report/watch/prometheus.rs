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

/// A counter with one series a pod.
fn by_pod(
    out: &mut String,
    name: &str,
    help: &str,
    counts: &std::collections::BTreeMap<String, u64>,
) {
    header(out, name, "counter", help);
    for (pod, n) in counts {
        let _ = writeln!(out, "{name}{{pod=\"{}\"}} {n}", label(pod));
    }
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
    type RouterCounter = fn(&crate::watch::routing::RouterTotals) -> u64;
    let per_router: [(&str, &str, RouterCounter); 5] = [
        (
            "kvaudit_watch_router_turns_total",
            "Requests continuing a conversation (carrying a reply) each --router was asked about.",
            |r| r.turns,
        ),
        (
            "kvaudit_watch_router_credited_tokens_total",
            "Prompt tokens each router credits to the previous turn's pod.",
            |r| r.credited_tokens,
        ),
        (
            "kvaudit_watch_router_rule_back_turns_total",
            "Turns each router's rule sends back to the previous turn's pod.",
            |r| r.rule_back,
        ),
        (
            "kvaudit_watch_router_observed_turns_total",
            "Turns where the pods' events show where the turn went.",
            |r| r.observed,
        ),
        (
            "kvaudit_watch_router_as_rule_turns_total",
            "Observed turns that went where each router's rule says.",
            |r| r.as_rule,
        ),
    ];
    for (name, help, value) in per_router {
        header(&mut out, name, "counter", help);
        for r in &t.routers {
            let _ = writeln!(
                out,
                "{name}{{model=\"{model}\",router=\"{}\"}} {}",
                label(&r.router),
                value(r)
            );
        }
    }
    header(
        &mut out,
        "kvaudit_watch_router_misrouted_tokens_total",
        "counter",
        "Misrouted prompt tokens by why each router sent the turn away (its rule's reason, or against its rule).",
    );
    for r in &t.routers {
        for (why, v) in &r.misrouted {
            let _ = writeln!(
                out,
                "kvaudit_watch_router_misrouted_tokens_total{{model=\"{model}\",router=\"{}\",reason=\"{}\"}} {v}",
                label(&r.router),
                label(why)
            );
        }
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
    let c = o.counts;
    by_pod(
        &mut out,
        "kvaudit_watch_events_lost_messages_total",
        "Live: each pod's event messages lost in sequence gaps and not recovered (its view is stale until it is cleared).",
        &c.gap_messages,
    );
    by_pod(
        &mut out,
        "kvaudit_watch_events_recovered_messages_total",
        "Live: each pod's event messages recovered through its replay endpoint (gaps, and the history before a late join).",
        &c.recovered_messages,
    );
    by_pod(
        &mut out,
        "kvaudit_watch_replay_failures_total",
        "Live: each pod's replay endpoint failing (no connection, no answer, a broken reply).",
        &c.replay_failures,
    );
    by_pod(
        &mut out,
        "kvaudit_watch_publisher_restarts_total",
        "Live: each pod's publisher starting again (its sequence fell back; the view starts empty).",
        &c.restarts,
    );
    header(
        &mut out,
        "kvaudit_watch_peers_lost_total",
        "counter",
        "Live: connections to a pod's publisher lost or given up on, by reason.",
    );
    for (pod, reasons) in &c.peers_lost {
        for (why, n) in reasons {
            let _ = writeln!(
                out,
                "kvaudit_watch_peers_lost_total{{pod=\"{}\",reason=\"{why}\"}} {n}",
                label(pod)
            );
        }
    }
    header(
        &mut out,
        "kvaudit_watch_unfollowed_total",
        "counter",
        "Proxy: exchanges or connections not followed (their bytes went through unchanged), by reason.",
    );
    for (why, n) in &c.unfollowed {
        let _ = writeln!(
            out,
            "kvaudit_watch_unfollowed_total{{reason=\"{why}\"}} {n}"
        );
    }
    header(
        &mut out,
        "kvaudit_watch_observations_dropped_total",
        "counter",
        "Live: observations (requests, answers, event batches) dropped because the monitor's queue was full.",
    );
    let _ = writeln!(
        out,
        "kvaudit_watch_observations_dropped_total {}",
        c.dropped
    );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::log::InputCounts;
    use crate::watch::monitor::Totals;

    #[test]
    fn what_the_live_inputs_lost_is_exported_by_pod_and_reason() {
        let mut counts = InputCounts::default();
        counts.gap_messages.insert("d0".into(), 7);
        counts.recovered_messages.insert("d0".into(), 5);
        counts.replay_failures.insert("d1".into(), 6);
        counts.restarts.insert("d1".into(), 1);
        counts
            .peers_lost
            .entry("d1".into())
            .or_default()
            .insert("socket_closed", 2);
        counts.unfollowed.insert("request_too_large", 3);
        counts.dropped = 4;
        let totals = Totals::default();
        let text = to_prometheus(&WatchOutput {
            model: "m",
            server: "vllm",
            block_size: 16,
            requests: "live",
            totals: &totals,
            counts: &counts,
        });
        for line in [
            "kvaudit_watch_events_lost_messages_total{pod=\"d0\"} 7",
            "kvaudit_watch_events_recovered_messages_total{pod=\"d0\"} 5",
            "kvaudit_watch_replay_failures_total{pod=\"d1\"} 6",
            "kvaudit_watch_publisher_restarts_total{pod=\"d1\"} 1",
            "kvaudit_watch_peers_lost_total{pod=\"d1\",reason=\"socket_closed\"} 2",
            "kvaudit_watch_unfollowed_total{reason=\"request_too_large\"} 3",
            "kvaudit_watch_observations_dropped_total 4",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
