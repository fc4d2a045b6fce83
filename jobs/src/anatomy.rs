//! `--stats`: a round's anatomy as the runtime measured it (issue 30, item 1). The runtime's
//! transport and detector counters are always on and go into the JSON report's
//! `trustees.workers[i]` ([`worker_json`]); `--stats` also turns the runtime's loop timing on
//! (`SKEIN_ANATOMY=1`, `skein::Builder::anatomy`) and prints the breakdown ([`print`]): every
//! worker's lines up to [`WORKERS_UP_TO`] workers, and beyond, min / median / max across the
//! workers, the traffic between each pair of ranks and the detectors' rounds, so that the
//! report of 16 ranks of 16 workers stays readable ([`Detail`]: `--stats=workers`,
//! `--stats=summary`).

use std::io::Write;

/// How much of the anatomy `--stats` prints (`--stats[=auto|workers|summary]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Detail {
    /// Every worker's lines up to [`WORKERS_UP_TO`] workers, the summary across the workers
    /// beyond (16 ranks of 16 workers would print thousands of lines).
    Auto,
    /// Every worker's lines, however many.
    Workers,
    /// The summary across the workers only.
    Summary,
}

/// Workers up to which `--stats` (auto) prints every worker's lines.
pub(crate) const WORKERS_UP_TO: usize = 8;

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

/// `min / median / max` of `xs` (the lower middle of an even count), each written by `f`;
/// `-` for none.
pub(crate) fn spread(mut xs: Vec<f64>, f: impl Fn(f64) -> String) -> String {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => "-".to_string(),
        n => format!("{} / {} / {}", f(xs[0]), f(xs[(n - 1) / 2]), f(xs[n - 1])),
    }
}

/// [`spread`] of the counts `f` reads from each of `items`.
fn counts<T>(items: &[&T], f: impl Fn(&T) -> u64) -> String {
    spread(items.iter().map(|t| f(t) as f64).collect(), whole)
}

/// A count with no decimals, a share with one (for [`spread`]).
fn whole(x: f64) -> String {
    format!("{x:.0}")
}
fn one(x: f64) -> String {
    format!("{x:.1}")
}

/// What a worker (or the sum of all, [`skein::Stats::total`]) sent across ranks: request
/// envelopes, their fill, forwarded segments, responses.
fn envelopes_text(w: &skein::WorkerStats) -> String {
    format!(
        "{} request envelopes ({} full, {} aged; {} bytes, {:.1} requests and {:.2} segments each, {:.1} requests per segment), {} segments forwarded, {} responses ({} bytes)",
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
    )
}

/// The breakdown `--stats` prints: every worker's lines ([`print_workers`]), or the summary
/// across the workers ([`print_summary`]), as `detail` says. `what` names the `count` units
/// the times are summed over: `search(es)`, `run(s)`.
pub(crate) fn print(
    stats: &skein::Stats,
    count: u64,
    what: &str,
    detail: Detail,
    out: &mut impl Write,
) -> std::io::Result<()> {
    // The threads the runtime resolved (`--worker-threads`, or its default per rank).
    let threads = match stats.threads() {
        0 => String::new(),
        t => format!("; {} workers on {t} threads", stats.workers.len()),
    };
    let many = stats.workers.len() > WORKERS_UP_TO;
    match detail {
        Detail::Workers => print_workers(stats, count, what, &threads, out),
        Detail::Auto if !many => print_workers(stats, count, what, &threads, out),
        Detail::Auto | Detail::Summary => {
            print_summary(stats, count, what, &threads, out)?;
            if many {
                writeln!(
                    out,
                    "  (every worker's lines: --stats=workers; every counter: the JSON report, --json)"
                )?;
            }
            Ok(())
        }
    }
}

/// The summary across the workers: `min / median / max` over the workers of each figure the
/// per-worker lines show, the totals of what they sent, the traffic between each pair of
/// ranks and the detectors' rounds (the first worker of each rank).
fn print_summary(
    stats: &skein::Stats,
    count: u64,
    what: &str,
    threads: &str,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let ws = &stats.workers;
    let ranks = ws.iter().map(|w| w.to_ranks.len()).max().unwrap_or(0).max(1);
    writeln!(out, "anatomy (across workers; times summed over {count} {what}{threads}):")?;
    let of_ranks = if ranks > 1 { format!(" of {ranks} ranks") } else { String::new() };
    writeln!(out, "  min / median / max over the {} workers{of_ranks}:", ws.len())?;
    let over = |f: &dyn Fn(&skein::WorkerStats) -> f64| ws.iter().map(f).collect::<Vec<f64>>();
    let timed: Vec<&skein::WorkerStats> = ws.iter().filter(|w| w.anatomy.passes > 0).collect();
    if timed.is_empty() {
        writeln!(out, "    loop not timed")?;
    } else {
        let ms = timed.iter().map(|w| w.anatomy.total_ns() as f64 / 1e6).collect();
        let passes = timed.iter().map(|w| w.anatomy.passes as f64).collect();
        writeln!(out, "    loop: {} ms in {} passes", spread(ms, one), spread(passes, whole))?;
        let names = skein::Anatomy::default().parts().map(|(n, _)| n);
        let parts: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(k, n)| {
                let pc = timed
                    .iter()
                    .map(|w| {
                        let a = &w.anatomy;
                        100.0 * a.parts()[k].1 as f64 / a.total_ns().max(1) as f64
                    })
                    .collect();
                format!("{n} {} %", spread(pc, one))
            })
            .collect();
        writeln!(out, "    {}", parts.join(", "))?;
    }
    writeln!(
        out,
        "    {} batches sent, {} requests served per batch",
        spread(over(&|w| w.batches_sent as f64), whole),
        spread(over(&|w| w.mean_batch()), one)
    )?;
    writeln!(
        out,
        "    {} parks, {} yields",
        spread(over(&|w| w.parks as f64), whole),
        spread(over(&|w| w.yields as f64), whole)
    )?;
    // The kernel counts a thread's switches and times once, on its first worker.
    let leaders: Vec<&skein::WorkerStats> = ws.iter().filter(|w| w.thread_workers > 0).collect();
    if !leaders.is_empty() {
        let loops_timed = leaders.iter().all(|w| w.anatomy.passes > 0);
        let times = if loops_timed && leaders.iter().any(|w| w.on_core_ns + w.runnable_ns > 0) {
            let pc = |f: fn(&skein::WorkerStats) -> u64| {
                let v = leaders
                    .iter()
                    .map(|w| 100.0 * f(w) as f64 / w.anatomy.total_ns().max(1) as f64)
                    .collect();
                spread(v, one)
            };
            format!(
                "; on a core {} % of the loop's time, waiting for a core {} %",
                pc(|w| w.on_core_ns),
                pc(|w| w.runnable_ns)
            )
        } else {
            String::new()
        };
        writeln!(
            out,
            "  min / median / max over the {} threads: context switches {} voluntary, {} involuntary{times}",
            leaders.len(),
            counts(&leaders, |w| w.switches_voluntary),
            counts(&leaders, |w| w.switches_involuntary)
        )?;
    }
    let total = stats.total();
    if total.envelopes_sent + total.responses_sent > 0 {
        writeln!(out, "  all workers: {}", envelopes_text(&total))?;
    }
    if ranks > 1 && ws.len() % ranks == 0 {
        // Each (sending rank, receiving rank) pair's traffic, its workers summed.
        let per_rank = ws.len() / ranks;
        let mut pairs = vec![skein::RankTraffic::default(); ranks * ranks];
        for (i, w) in ws.iter().enumerate() {
            for (to, t) in w.to_ranks.iter().enumerate() {
                pairs[i / per_rank * ranks + to] += t;
            }
        }
        let pairs: Vec<&skein::RankTraffic> = pairs
            .iter()
            .enumerate()
            .filter(|(k, _)| k / ranks != k % ranks)
            .map(|(_, t)| t)
            .collect();
        writeln!(
            out,
            "  from one rank to another ({} pairs, min / median / max): {} envelopes, {} bytes, {} requests; {} responses",
            pairs.len(),
            counts(&pairs, |t| t.envelopes),
            counts(&pairs, |t| t.bytes),
            counts(&pairs, |t| t.requests),
            counts(&pairs, |t| t.responses)
        )?;
    }
    let detectors: Vec<&skein::WorkerStats> = ws.iter().filter(|w| w.detector_steps > 0).collect();
    if !detectors.is_empty() {
        let ends: Vec<&&skein::WorkerStats> =
            detectors.iter().filter(|w| w.round_ends.count > 0).collect();
        let ends = if ends.is_empty() {
            String::new()
        } else {
            let us = |ns: u64| ns as f64 / 1e3;
            let medians = ends.iter().filter_map(|w| w.round_ends.median_ns()).map(us).collect();
            let longest = ends.iter().map(|w| w.round_ends.max_ns).max().unwrap_or(0);
            format!(
                "; round ends (last work to verdict): median {} µs, longest {:.1} µs",
                spread(medians, one),
                us(longest)
            )
        };
        writeln!(
            out,
            "  detectors ({}, min / median / max): {} steps, all-reduces {} posted, {} quiescent verdicts; {} posts held{ends}",
            detectors.len(),
            counts(&detectors, |w| w.detector_steps),
            counts(&detectors, |w| w.all_reduces_posted),
            counts(&detectors, |w| w.quiescent_verdicts),
            counts(&detectors, |w| w.posts_held)
        )?;
    }
    Ok(())
}

/// Every worker's lines: the loop's time by part (when timed), envelopes and bytes per
/// destination rank, requests per batch and per envelope, the detector's rounds.
fn print_workers(
    stats: &skein::Stats,
    count: u64,
    what: &str,
    threads: &str,
    out: &mut impl Write,
) -> std::io::Result<()> {
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
            writeln!(out, "  worker {i}: {}", envelopes_text(w))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_min_lower_median_max() {
        let f = |x: f64| format!("{x:.0}");
        assert_eq!(spread(vec![], f), "-");
        assert_eq!(spread(vec![7.0], f), "7 / 7 / 7");
        assert_eq!(spread(vec![4.0, 1.0, 3.0, 2.0], f), "1 / 2 / 4");
        assert_eq!(spread(vec![5.0, 1.0, 9.0], f), "1 / 5 / 9");
    }

    /// Stats of `ranks` ranks of `per_rank` workers, each worker of rank `r` sending
    /// `r + 1` envelopes to every other rank; the first worker of each rank detects.
    fn split(ranks: usize, per_rank: usize) -> skein::Stats {
        let mut stats = skein::Stats::default();
        for i in 0..ranks * per_rank {
            let r = i / per_rank;
            let mut w = skein::WorkerStats::default();
            w.to_ranks = vec![skein::RankTraffic::default(); ranks];
            for (to, t) in w.to_ranks.iter_mut().enumerate().filter(|(to, _)| *to != r) {
                t.envelopes = r as u64 + 1;
                t.requests = 10 * (to as u64 + 1);
            }
            w.envelopes_sent = (ranks as u64 - 1) * (r as u64 + 1);
            w.thread_workers = 1;
            w.detector_steps = u64::from(i % per_rank == 0);
            stats.workers.push(w);
        }
        stats
    }

    fn printed(stats: &skein::Stats, detail: Detail) -> String {
        let mut out = Vec::new();
        print(stats, 1, "run(s)", detail, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_summary_sums_each_pair_of_ranks_over_its_workers() {
        // 3 ranks of 3 workers: rank r sends 3 (r + 1) envelopes to each other rank.
        let out = printed(&split(3, 3), Detail::Auto);
        assert!(out.contains("over the 9 workers of 3 ranks"), "{out}");
        assert!(
            out.contains(
                "from one rank to another (6 pairs, min / median / max): 3 / 6 / 9 envelopes"
            ),
            "{out}"
        );
        // Requests to rank `to`: 3 workers x 10 (to + 1), from the two other ranks.
        assert!(out.contains("30 / 60 / 90 requests"), "{out}");
        assert!(out.contains("detectors (3, min / median / max): 1 / 1 / 1 steps"), "{out}");
        assert!(out.contains("    loop not timed"), "{out}");
        assert!(out.contains("(every worker's lines: --stats=workers"), "{out}");
        // Up to 8 workers: a line per worker; asked for, the summary of few.
        let few = split(2, 2);
        assert!(printed(&few, Detail::Auto).contains("  worker 3: loop not timed"));
        assert!(printed(&few, Detail::Summary).contains("over the 4 workers of 2 ranks"));
        assert!(!printed(&few, Detail::Summary).contains("every worker's lines"));
    }
}
