//! `--stats`: a round's anatomy as the runtime measured it (issue 30, item 1). The runtime's
//! transport and detector counters are always on and go into the JSON report's
//! `trustees.workers[i]` ([`worker_json`]); `--stats` also turns the runtime's loop timing on
//! (`SKEIN_ANATOMY=1`, `skein::Builder::anatomy`) and prints the breakdown ([`print`]).

use std::io::Write;

/// Turns the runtime's loop timing on for every runtime this process builds (call before
/// building one; under mpirun every rank parses the same arguments and calls it).
pub(crate) fn enable() {
    std::env::set_var("SKEIN_ANATOMY", "1");
}

/// Every worker's counters as JSON objects (the `trustees.workers` of a search report, the
/// `skein_workers` of a PageRank or components report): what it served and sent, and
/// [`worker_json`]'s counters.
pub(crate) fn workers_json(stats: &skein::Stats) -> Vec<serde_json::Value> {
    stats
        .workers
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let mut o = serde_json::Map::new();
            o.insert("worker".into(), i.into());
            o.insert("requests_served".into(), w.requests_served.into());
            o.insert("batches_served".into(), w.batches_served.into());
            o.insert("mean_batch".into(), w.mean_batch().into());
            o.insert("requests_sent".into(), w.requests_sent.into());
            o.insert("local_requests".into(), w.local_requests.into());
            o.insert("fibers_run".into(), w.fibers_run.into());
            o.insert("useful_polls".into(), w.useful_polls.into());
            o.insert("idle_polls".into(), w.idle_polls.into());
            o.insert("busy_fraction".into(), w.busy_fraction().into());
            o.extend(worker_json(w));
            serde_json::Value::Object(o)
        })
        .collect()
}

/// A report's `run` object: what the runs cost the reporting rank around their workers
/// (`skein::RunTimes`), in nanoseconds summed over the runs.
pub(crate) fn run_json(run: &skein::RunTimes) -> serde_json::Value {
    serde_json::json!({
        "runs": run.runs,
        "setup_ns": run.setup_ns,
        "workers_ns": run.workers_ns,
        "close_ns": run.close_ns,
    })
}

/// The transport, detector and timing counters of one worker, for its JSON object.
pub(crate) fn worker_json(w: &skein::WorkerStats) -> serde_json::Map<String, serde_json::Value> {
    let to_ranks: Vec<serde_json::Value> = w
        .to_ranks
        .iter()
        .enumerate()
        .map(|(r, t)| {
            serde_json::json!({
                "rank": r,
                "envelopes": t.envelopes,
                "bytes": t.bytes,
                "segments": t.segments,
                "requests": t.requests,
                "responses": t.responses,
                "response_bytes": t.response_bytes,
            })
        })
        .collect();
    let a = &w.anatomy;
    let mut anatomy = serde_json::Map::new();
    anatomy.insert("passes".into(), a.passes.into());
    for (name, ns) in a.parts() {
        anatomy.insert(format!("{name}_ns"), ns.into());
    }
    anatomy.insert("total_ns".into(), a.total_ns().into());
    let v = serde_json::json!({
        "batches_sent": w.batches_sent,
        "envelopes_sent": w.envelopes_sent,
        "segments_sent": w.segments_sent,
        "segments_forwarded": w.segments_forwarded,
        "envelope_bytes_sent": w.envelope_bytes_sent,
        "remote_requests_sent": w.remote_requests_sent,
        "envelopes_full": w.envelopes_full,
        "envelopes_aged": w.envelopes_aged,
        "requests_per_envelope": w.mean_envelope(),
        "segments_per_envelope": w.segments_per_envelope(),
        "requests_per_remote_batch": w.requests_per_remote_batch(),
        "responses_sent": w.responses_sent,
        "response_bytes_sent": w.response_bytes_sent,
        "to_ranks": to_ranks,
        "detector_steps": w.detector_steps,
        "all_reduces_posted": w.all_reduces_posted,
        "all_reduces_completed": w.all_reduces_completed,
        "posts_held": w.posts_held,
        "quiescent_verdicts": w.quiescent_verdicts,
        "parks": w.parks,
        "park_timeouts": w.park_timeouts,
        "yields": w.yields,
        "switches_voluntary": w.switches_voluntary,
        "switches_involuntary": w.switches_involuntary,
        "on_core_ns": w.on_core_ns,
        "runnable_ns": w.runnable_ns,
        "thread_workers": w.thread_workers,
        "round_ends": round_ends_json(&w.round_ends),
        "anatomy": anatomy,
    });
    match v {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("a JSON object"),
    }
}

/// A worker's round ends ([`skein::RoundEnds`]): how many, and their median, mean and
/// longest in ns (null when none was counted).
fn round_ends_json(r: &skein::RoundEnds) -> serde_json::Value {
    serde_json::json!({
        "count": r.count,
        "median_ns": r.median_ns(),
        "mean_ns": r.mean_ns(),
        "max_ns": (r.count > 0).then_some(r.max_ns),
    })
}

/// The round ends of a worker as printed ("" when none was counted).
fn round_ends_text(r: &skein::RoundEnds) -> String {
    match (r.median_ns(), r.mean_ns()) {
        (Some(median), Some(mean)) => format!(
            "; round ends (last work to verdict): median {:.1} µs, mean {:.1} µs, longest {:.1} µs",
            median as f64 / 1e3,
            mean / 1e3,
            r.max_ns as f64 / 1e3
        ),
        _ => String::new(),
    }
}

/// The thread's time on a core and waiting for one, as parts of the loop's time (`loop_ns`,
/// when timed; the wait is read only then), or its time on a core in ms; nothing where the
/// kernel counted neither.
fn thread_times(w: &skein::WorkerStats, loop_ns: u64) -> String {
    if loop_ns > 0 && w.on_core_ns + w.runnable_ns > 0 {
        let pc = |ns: u64| 100.0 * ns as f64 / loop_ns as f64;
        format!(
            "; on a core {:.1}% of the loop's time, waiting for a core {:.1}%",
            pc(w.on_core_ns),
            pc(w.runnable_ns)
        )
    } else if w.on_core_ns > 0 {
        format!("; on a core {:.1} ms", w.on_core_ns as f64 / 1e6)
    } else {
        String::new()
    }
}

/// The breakdown, per worker: the loop's time by part (when timed), envelopes and bytes per
/// destination rank, requests per batch and per envelope, the detector's rounds.
/// `what` names the `count` units the times are summed over: `search(es)`, `run(s)`.
pub(crate) fn print(
    stats: &skein::Stats,
    count: u64,
    what: &str,
    out: &mut impl Write,
) -> std::io::Result<()> {
    // The threads the runtime resolved (`--worker-threads`, or its default per rank).
    let threads = match stats.threads() {
        0 => String::new(),
        t => format!("; {} workers on {t} threads", stats.workers.len()),
    };
    writeln!(out, "anatomy (per worker; times summed over {count} {what}{threads}):")?;
    for (i, w) in stats.workers.iter().enumerate() {
        let a = &w.anatomy;
        if a.passes > 0 {
            let total = a.total_ns().max(1) as f64;
            let parts: Vec<String> = a
                .parts()
                .iter()
                .map(|(n, ns)| format!("{n} {:.1}%", 100.0 * *ns as f64 / total))
                .collect();
            writeln!(
                out,
                "  worker {i}: {:.1} ms in {} passes: {}",
                total / 1e6,
                a.passes,
                parts.join(", ")
            )?;
        } else {
            writeln!(out, "  worker {i}: loop not timed")?;
        }
        writeln!(
            out,
            "  worker {i}: {} batches sent, {} requests served in {} batches ({:.1} per batch)",
            w.batches_sent,
            w.requests_served,
            w.batches_served,
            w.mean_batch()
        )?;
        writeln!(
            out,
            "  worker {i}: {} parks ({} unwoken), {} yields, context switches {} voluntary, {} involuntary{}",
            w.parks,
            w.park_timeouts,
            w.yields,
            w.switches_voluntary,
            w.switches_involuntary,
            thread_times(w, a.total_ns())
        )?;
        if w.envelopes_sent + w.responses_sent > 0 {
            writeln!(
                out,
                "  worker {i}: {} request envelopes ({} full, {} aged; {} bytes, {:.1} requests and {:.2} segments each, {:.1} requests per segment), {} segments forwarded, {} responses ({} bytes)",
                w.envelopes_sent,
                w.envelopes_full,
                w.envelopes_aged,
                w.envelope_bytes_sent,
                w.mean_envelope(),
                w.segments_per_envelope(),
                w.requests_per_remote_batch(),
                w.segments_forwarded,
                w.responses_sent,
                w.response_bytes_sent
            )?;
            for (r, t) in
                w.to_ranks.iter().enumerate().filter(|(_, t)| t.envelopes + t.responses > 0)
            {
                writeln!(
                    out,
                    "    to rank {r}: {} envelopes, {} bytes, {} segments, {} requests; {} responses, {} bytes",
                    t.envelopes, t.bytes, t.segments, t.requests, t.responses, t.response_bytes
                )?;
            }
        }
        if w.detector_steps > 0 {
            let passes = w.useful_polls + w.idle_polls;
            writeln!(
                out,
                "  worker {i}: detector {} steps ({:.1} loop passes apart), all-reduces {} posted, {} completed, {} quiescent verdicts; {} posts held (a task of the rank open){}",
                w.detector_steps,
                passes as f64 / w.detector_steps as f64,
                w.all_reduces_posted,
                w.all_reduces_completed,
                w.quiescent_verdicts,
                w.posts_held,
                round_ends_text(&w.round_ends)
            )?;
        }
    }
    Ok(())
}
