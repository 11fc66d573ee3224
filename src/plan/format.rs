//! How a plan is printed: `text` for terminals, `markdown` for pull-request comments, `json`.
//! Takes a finished [`Plan`] and writes it to any [`fmt::Write`] (or returns a string); it
//! computes nothing about the fleet and knows nothing of where the output goes (the caller
//! decides on colour and size). The writers hold no more than one object's diff at a time, so
//! a plan is printed without a second copy of its diffs in memory.

use super::story::{Consequence, Risk};
use super::{
    Change, ClusterMove, ClusterPlan, ClusterReason, EvictionOutcome, EvictionPlan, ObjectDiff,
    PlacementPlan, Plan, RolloutImpact, RunNote, RunNoteKind, Score, StageImpact, Transition,
};
use crate::rollout::Strategy;
use std::fmt::{self, Write as _};

/// The command a reader runs to see what the markdown comment had to leave out.
const SEE_CLUSTER: &str = "gitfleet plan --format text --cluster NAME";
/// Clusters named in a summary-table cell before `(+N more)`.
const TABLE_NAMES: usize = 5;
/// Clusters named in the note on what the size cap left out.
const NOTE_NAMES: usize = 10;

/// The plan as JSON; its schema is documented in docs/reference/plan-json.md.
pub fn json(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("plan serialises")
}

/// [`json`], written to `out` as it is serialised.
pub fn write_json(out: impl std::io::Write, plan: &Plan) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(out, plan)
}

/// The plan for a terminal: a header line, the head's errors, a block per placement that
/// changes, then the manifest diffs per cluster. ANSI colours only when `color` is true.
pub fn text(plan: &Plan, color: bool) -> String {
    let mut out = String::new();
    write_text(&mut out, plan, color).expect("writing to a String does not fail");
    out
}

/// [`text`], written to `out`.
pub fn write_text(out: &mut impl fmt::Write, plan: &Plan, color: bool) -> fmt::Result {
    let p = Paint(color);
    let range = format!("gitfleet plan {}..{}", short(&plan.base), short(&plan.head));
    writeln!(out, "{}: {}", p.bold(&range), headline(plan))?;
    if let Some(signed) = &plan.head_signature {
        writeln!(out, "head signature: {signed}")?;
    }
    if let Some(h) = &plan.held {
        writeln!(
            out,
            "{} {}",
            p.red_bold("the daemon would hold this head:"),
            h.message
        )?;
    }
    if !plan.errors.is_empty() {
        for e in &plan.errors {
            writeln!(out, "{} {e}", p.red_bold("error:"))?;
        }
        return Ok(());
    }
    for w in &plan.warnings {
        writeln!(out, "{} {w}", p.yellow("warning:"))?;
    }
    let stories = story_lines(plan);
    if !stories.is_empty() {
        writeln!(out, "\nsummary, riskiest first:")?;
        for (risk, line) in stories {
            let line = format!("  [{}] {line}", risk_word(risk));
            let line = match risk {
                Risk::High => p.red_bold(&line),
                Risk::Medium => p.yellow(&line),
                Risk::Low => line,
            };
            writeln!(out, "{line}")?;
        }
    }
    for c in &plan.clusters {
        for e in &c.errors {
            writeln!(out, "{} {}: {e}", p.red_bold("error:"), c.cluster)?;
        }
    }
    if !plan.evictions.is_empty() {
        writeln!(out, "\nevictions:")?;
        for e in &plan.evictions {
            let line = eviction_line(e);
            let line = match e.outcome {
                EvictionOutcome::Executed => p.red(&line),
                _ => p.yellow(&line),
            };
            writeln!(out, "{line}")?;
        }
    }
    let (shown, unchanged) = split_placements(plan);
    for pl in shown {
        out.write_char('\n')?;
        text_placement(out, &p, pl)?;
    }
    if unchanged > 0 {
        out.write_char('\n')?;
        writeln!(
            out,
            "{}",
            count(unchanged, "placement", "placements") + " unchanged"
        )?;
    }
    for c in plan.clusters.iter().filter(|c| !c.objects.is_empty()) {
        out.write_char('\n')?;
        writeln!(
            out,
            "{}",
            p.bold(&format!("cluster {}: {}", c.cluster, objects_summary(c)))
        )?;
        for o in &c.objects {
            let line = match &o.source {
                Some(source) => format!(
                    "  {} {} ({}, {source})",
                    sigil(o.change),
                    o.object,
                    o.placement
                ),
                None => format!("  {} {} ({})", sigil(o.change), o.object, o.placement),
            };
            writeln!(out, "{}", p.change(o.change, &line))?;
            for d in o.diff.lines() {
                writeln!(out, "    {}", p.diff_line(d))?;
            }
        }
    }
    Ok(())
}

/// One eviction: the cluster the placement loses, or why it does not.
fn eviction_line(e: &EvictionPlan) -> String {
    let what = match e.outcome {
        EvictionOutcome::Executed => format!("{} loses {}", e.placement, e.cluster),
        EvictionOutcome::Blocked => format!("{} keeps {} (not executed)", e.placement, e.cluster),
        EvictionOutcome::Invalid => format!("{} of {} (invalid)", e.cluster, e.placement),
    };
    format!(
        "  {} {}: {what}: {}",
        match e.outcome {
            EvictionOutcome::Executed => "-",
            _ => "!",
        },
        e.name,
        e.message
    )
}

fn text_placement(out: &mut impl fmt::Write, p: &Paint, pl: &PlacementPlan) -> fmt::Result {
    let title = format!("{} {} ({})", sigil(pl.change), pl.key, change_label(pl));
    writeln!(out, "{}", p.bold(&p.change(pl.change, &title)))?;
    for m in &pl.gained {
        let line = format!("  + {} gained: {}", m.cluster, move_reason(m));
        writeln!(out, "{}", p.green(&line))?;
    }
    for m in &pl.lost {
        let line = format!("  - {} lost: {}", m.cluster, move_reason(m));
        writeln!(out, "{}", p.red(&line))?;
    }
    if let Some(w) = winners_line(pl) {
        writeln!(out, "    {w}")?;
    }
    for l in score_legend(pl) {
        writeln!(out, "    {l}")?;
    }
    for u in unschedulable(pl) {
        let line = format!("  ! {} unschedulable: {}", u.cluster, u.reason);
        writeln!(out, "{}", p.yellow(&line))?;
    }
    if let Some(c) = pl.condition.as_ref().filter(|c| c.status != "True") {
        let line = format!("  ! {}={} ({}): {}", c.type_, c.status, c.reason, c.message);
        writeln!(out, "{}", p.yellow(&line))?;
    }
    for line in snapshot_lines(pl) {
        writeln!(out, "  {line}")?;
    }
    if let Some(r) = resources_line(pl, |s| s.to_string()) {
        writeln!(out, "  resources: {r}")?;
    }
    for f in feedback_lines(pl) {
        writeln!(out, "  {f}")?;
    }
    if let Some(r) = &pl.rollout {
        writeln!(out, "  rollout: {}", rollout_description(r))?;
        for s in &r.stages {
            writeln!(out, "    {}", stage_line(s, r))?;
        }
        for n in &r.run_notes {
            writeln!(out, "{}", p.yellow(&format!("    ! {}", run_note_line(n))))?;
        }
    }
    Ok(())
}

/// The plan as a pull-request comment (GitHub-flavoured markdown): a summary table, a section
/// per placement, then the diffs folded per cluster. When the whole would exceed `max_bytes`,
/// diffs (and if need be placement sections) are left out, never in the middle of a block, and
/// a closing note says what was cut and how to see it.
pub fn markdown(plan: &Plan, max_bytes: usize) -> String {
    let mut out = String::new();
    write_markdown(&mut out, plan, max_bytes).expect("writing to a String does not fail");
    out
}

/// [`markdown`], written to `out`.
pub fn write_markdown(w: &mut impl fmt::Write, plan: &Plan, max_bytes: usize) -> fmt::Result {
    // The part before the placement sections, which no cap cuts.
    let mut out = format!(
        "### gitfleet plan `{}` → `{}`\n\n",
        short(&plan.base),
        short(&plan.head)
    );
    if let Some(signed) = &plan.head_signature {
        let _ = writeln!(out, "Head signature: {signed}\n");
    }
    if let Some(h) = &plan.held {
        let _ = writeln!(
            out,
            "> [!WARNING]\n> The daemon would hold this head: {}\n",
            h.message
        );
    }
    if !plan.errors.is_empty() {
        markdown_errors(&mut out, plan, max_bytes);
        return w.write_str(&out);
    }
    if !plan.warnings.is_empty() {
        let _ = writeln!(
            out,
            "> [!WARNING]\n> {} (likely mistakes; the fleet accepts them):",
            count(plan.warnings.len(), "warning", "warnings")
        );
        for warning in &plan.warnings {
            let _ = writeln!(out, "> - `{}`", warning.replace('`', "'"));
        }
        out.push('\n');
    }
    if !plan.evictions.is_empty() {
        out.push_str("Evictions:\n");
        for e in &plan.evictions {
            let _ = writeln!(
                out,
                "- `{}`",
                eviction_line(e).trim_start().replace('`', "'")
            );
        }
        out.push('\n');
    }
    if !plan.has_changes() {
        out.push_str("No change to the fleet.\n");
        return w.write_str(&out);
    }
    let _ = writeln!(out, "**{}**\n", headline(plan));
    let deletions = deletion_lines(plan);
    if !deletions.is_empty() {
        out.push_str("> [!CAUTION]\n");
        for d in &deletions {
            let _ = writeln!(out, "> {d}  ");
        }
        out.push('\n');
    }
    let stories = story_lines(plan);
    if !stories.is_empty() {
        for (risk, line) in &stories {
            let _ = writeln!(out, "- **{}** {line}", risk_word(*risk));
        }
        out.push('\n');
    }
    let render_errors: Vec<(&str, &str)> = plan
        .clusters
        .iter()
        .flat_map(|c| c.errors.iter().map(|e| (c.cluster.as_str(), e.as_str())))
        .collect();
    if !render_errors.is_empty() {
        out.push_str("> [!WARNING]\n> **The head cannot be rendered for every cluster:**\n>\n");
        for (cluster, e) in render_errors {
            let _ = writeln!(out, "> - `{cluster}`: {}", code(e));
        }
        out.push('\n');
    }
    let (shown, unchanged) = split_placements(plan);
    if !shown.is_empty() {
        out.push_str("| Placement | Change | Gained | Lost | Policy snapshot | Resource snapshot | Rollout |\n");
        out.push_str("|---|---|---|---|---|---|---|\n");
        for pl in &shown {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} | {} |",
                pl.key,
                cell(&change_label(pl)),
                cell(&names(pl.gained.iter().map(|m| m.cluster.as_str()))),
                cell(&names(pl.lost.iter().map(|m| m.cluster.as_str()))),
                transition(&pl.policy_snapshot_index),
                transition(&pl.resource_snapshot_index),
                cell(&pl.rollout.as_ref().map_or("–".into(), rollout_brief)),
            );
        }
        out.push('\n');
    }
    if unchanged > 0 {
        let _ = writeln!(
            out,
            "{} unchanged.\n",
            count(unchanged, "other placement", "other placements")
        );
    }

    let sections: Vec<String> = shown.iter().map(|pl| markdown_placement(pl)).collect();
    let clusters: Vec<&ClusterPlan> = plan
        .clusters
        .iter()
        .filter(|c| !c.objects.is_empty())
        .collect();
    // Measured, not built: the whole can be many times the manifests' size.
    let mut full = Length(0);
    assemble(&mut full, &out, &sections, &clusters, None)?;
    let cap = (full.0 > max_bytes).then_some(max_bytes);
    assemble(w, &out, &sections, &clusters, cap)
}

/// The placement sections and the diffs after `core`, within `cap` bytes if given. What may be
/// cut, in order: the diffs object by object from the end, then the placement sections; a
/// closing note says what was.
fn assemble(
    out: &mut impl fmt::Write,
    core: &str,
    sections: &[String],
    clusters: &[&ClusterPlan],
    cap: Option<usize>,
) -> fmt::Result {
    let mut out = Counted { inner: out, len: 0 };
    out.write_str(core)?;
    let reserve = cap.map_or(0, |_| note_reserve(clusters, sections.len()));
    let max_bytes = cap.unwrap_or(usize::MAX);
    let fits = |len: usize, extra: usize| len + extra + reserve <= max_bytes;

    let mut sections_cut = 0;
    for s in sections {
        if sections_cut == 0 && fits(out.len, s.len()) {
            out.write_str(s)?;
        } else {
            sections_cut += 1;
        }
    }
    let mut cut_clusters: Vec<&str> = Vec::new();
    let mut cut_objects = 0;
    let mut stopped = sections_cut > 0;
    let manifests_heading = "#### Manifests\n\n";
    let mut heading_done = false;
    for c in clusters {
        if stopped {
            cut_clusters.push(&c.cluster);
            cut_objects += c.objects.len();
            continue;
        }
        // What wraps the blocks, at its longest: the heading (the first time) and the summary.
        let heading = if heading_done {
            0
        } else {
            manifests_heading.len()
        };
        let frame = heading + details_open(c, 0).len() + 64 + details_close().len();
        // How many of the cluster's object blocks fit (each measured, none kept).
        let k = match cap {
            None => c.objects.len(),
            Some(_) => {
                let mut used = 0;
                let mut k = 0;
                for o in &c.objects {
                    let mut block = Length(0);
                    write_markdown_object(&mut block, o)?;
                    if fits(out.len, frame + used + block.0) {
                        used += block.0;
                        k += 1;
                    } else {
                        break;
                    }
                }
                k
            }
        };
        if k == 0 {
            stopped = true;
            cut_clusters.push(&c.cluster);
            cut_objects += c.objects.len();
            continue;
        }
        if !heading_done {
            out.write_str(manifests_heading)?;
            heading_done = true;
        }
        let all = c.objects.len();
        out.write_str(&details_open(c, if k < all { k } else { 0 }))?;
        for o in &c.objects[..k] {
            write_markdown_object(&mut out, o)?;
        }
        out.write_str(details_close())?;
        if k < all {
            stopped = true;
            cut_clusters.push(&c.cluster);
            cut_objects += all - k;
        }
    }
    if sections_cut > 0 || cut_objects > 0 {
        out.write_str(&cut_note(
            max_bytes,
            sections_cut,
            &cut_clusters,
            cut_objects,
        ))?;
    }
    Ok(())
}

/// A [`fmt::Write`] that only counts the bytes written to it.
struct Length(usize);

impl fmt::Write for Length {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

/// A [`fmt::Write`] passing everything on and counting the bytes.
struct Counted<'w, W> {
    inner: &'w mut W,
    len: usize,
}

impl<W: fmt::Write> fmt::Write for Counted<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.len += s.len();
        self.inner.write_str(s)
    }
}

fn markdown_errors(out: &mut String, plan: &Plan, max_bytes: usize) {
    let n = plan.errors.len();
    let _ = write!(
        out,
        "> [!CAUTION]\n> **The head commit is invalid: {}.** Nothing else was planned; fix {} first.\n>\n",
        count(n, "error", "errors"),
        if n == 1 { "it" } else { "them" }
    );
    let tail = 160;
    for (i, e) in plan.errors.iter().enumerate() {
        let line = format!("> - {}\n", code(e));
        if out.len() + line.len() + tail > max_bytes {
            let _ = writeln!(
                out,
                ">\n> …and {} more: run `gitfleet validate --rev {}` to see them all.",
                n - i,
                short(&plan.head)
            );
            return;
        }
        out.push_str(&line);
    }
}

fn markdown_placement(pl: &PlacementPlan) -> String {
    let mut s = format!("#### `{}` — {}\n\n", pl.key, change_label(pl));
    for m in &pl.gained {
        let _ = writeln!(
            s,
            "- **gained** `{}`: {}",
            m.cluster,
            escape(&move_reason(m))
        );
    }
    for m in &pl.lost {
        let _ = writeln!(s, "- **lost** `{}`: {}", m.cluster, escape(&move_reason(m)));
    }
    if let Some(w) = winners_line(pl) {
        let _ = writeln!(s, "  - {}", escape(&w));
    }
    for l in score_legend(pl) {
        let _ = writeln!(s, "  - {}", escape(&l));
    }
    for u in unschedulable(pl) {
        let _ = writeln!(
            s,
            "- **unschedulable** `{}`: {}",
            u.cluster,
            escape(&u.reason)
        );
    }
    if let Some(c) = pl.condition.as_ref().filter(|c| c.status != "True") {
        let _ = writeln!(
            s,
            "- **{}={}** ({}): {}",
            c.type_,
            c.status,
            c.reason,
            escape(&c.message)
        );
    }
    for line in snapshot_lines(pl) {
        let _ = writeln!(s, "- {line}");
    }
    if let Some(r) = resources_line(pl, |id| format!("`{id}`")) {
        let _ = writeln!(s, "- resources: {r}");
    }
    for f in feedback_lines(pl) {
        let _ = writeln!(s, "- {}", escape(&f));
    }
    if let Some(r) = &pl.rollout {
        let _ = writeln!(s, "- rollout: {}", escape(&rollout_description(r)));
        for n in &r.run_notes {
            let _ = writeln!(s, "- :warning: {}", escape(&run_note_line(n)));
        }
        if !r.stages.is_empty() {
            s.push_str("\n| Run | Stage | Clusters | Updating | At a time | Before | After |\n");
            s.push_str("|---|---|---|---|---|---|---|\n");
            for st in &r.stages {
                let updating = stage_updating(st, r);
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    cell(&st.run),
                    cell(&st.stage),
                    cell(&list_or_dash(&st.clusters)),
                    cell(&list_or_dash(&updating)),
                    st.max_concurrency,
                    cell(&list_or_dash(&st.before)),
                    cell(&list_or_dash(&st.after)),
                );
            }
        }
    }
    s.push('\n');
    s
}

#[cfg(test)]
fn markdown_object(o: &ObjectDiff) -> String {
    let mut s = String::new();
    write_markdown_object(&mut s, o).expect("writing to a String does not fail");
    s
}

fn write_markdown_object(out: &mut impl fmt::Write, o: &ObjectDiff) -> fmt::Result {
    let fence = fence_for(&o.diff);
    write!(
        out,
        "**{}** `{}` (`{}`)\n\n{fence}diff\n{}\n{fence}\n\n",
        change_word(o.change),
        o.object,
        o.placement,
        o.diff.trim_end_matches('\n')
    )
}

/// `<details>` opening for a cluster; `shown` > 0 when only that many of its objects follow.
fn details_open(c: &ClusterPlan, shown: usize) -> String {
    let more = if shown > 0 {
        format!(", first {shown} shown")
    } else {
        String::new()
    };
    format!(
        "<details><summary><code>{}</code> — {}{more}</summary>\n\n",
        html(&c.cluster),
        objects_summary(c)
    )
}

fn details_close() -> &'static str {
    "</details>\n\n"
}

fn cut_note(max_bytes: usize, sections: usize, clusters: &[&str], objects: usize) -> String {
    let mut parts = Vec::new();
    if sections > 0 {
        parts.push(count(sections, "placement section", "placement sections"));
    }
    if objects > 0 {
        let mut named: Vec<String> = clusters
            .iter()
            .take(NOTE_NAMES)
            .map(|c| format!("`{c}`"))
            .collect();
        if clusters.len() > NOTE_NAMES {
            named.push(format!("{} more", clusters.len() - NOTE_NAMES));
        }
        parts.push(format!(
            "the diffs of {} on {} ({})",
            count(objects, "object", "objects"),
            count(clusters.len(), "cluster", "clusters"),
            named.join(", ")
        ));
    }
    format!(
        "> [!NOTE]\n> This comment is capped at {max_bytes} bytes: {} left out. See everything with `{SEE_CLUSTER}`.\n",
        parts.join(" and ")
    )
}

/// An upper bound of the cut note's length, so the note always fits in what the cap leaves.
fn note_reserve(clusters: &[&ClusterPlan], sections: usize) -> usize {
    let mut longest: Vec<usize> = clusters.iter().map(|c| c.cluster.len()).collect();
    longest.sort_unstable_by(|a, b| b.cmp(a));
    let names: usize = longest.iter().take(NOTE_NAMES).map(|n| n + 4).sum();
    let objects: usize = clusters.iter().map(|c| c.objects.len()).sum();
    cut_note(usize::MAX, sections, &[], objects.max(1)).len() + names + 64
}

// Shared wording.

/// `1 placement changed, 1 cluster lost, 4 objects removed on 1 cluster`.
fn headline(plan: &Plan) -> String {
    if !plan.errors.is_empty() {
        return format!(
            "the head commit is invalid ({})",
            count(plan.errors.len(), "error", "errors")
        );
    }
    if !plan.has_changes() {
        return "no change to the fleet".into();
    }
    let s = &plan.summary;
    let mut parts = Vec::new();
    for (n, what) in [
        (s.placements_added, "added"),
        (s.placements_removed, "removed"),
        (s.placements_changed, "changed"),
    ] {
        if n > 0 {
            parts.push(format!("{} {what}", count(n, "placement", "placements")));
        }
    }
    for (n, what) in [(s.clusters_gained, "gained"), (s.clusters_lost, "lost")] {
        if n > 0 {
            parts.push(format!("{} {what}", count(n, "cluster", "clusters")));
        }
    }
    let objects: Vec<String> = [
        (s.objects_added, "added"),
        (s.objects_removed, "removed"),
        (s.objects_changed, "changed"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .enumerate()
    .map(|(i, (n, what))| match i {
        0 => format!("{} {what}", count(*n, "object", "objects")),
        _ => format!("{n} {what}"),
    })
    .collect();
    if !objects.is_empty() {
        parts.push(format!(
            "{} on {}",
            objects.join(", "),
            count(s.clusters_with_manifest_changes, "cluster", "clusters")
        ));
    }
    if s.render_errors > 0 {
        parts.push(count(s.render_errors, "render error", "render errors"));
    }
    parts.join(", ")
}

/// The placements worth a section (changed, or with an effect on the fleet or a problem), and
/// how many others there are.
fn split_placements(plan: &Plan) -> (Vec<&PlacementPlan>, usize) {
    let shown: Vec<&PlacementPlan> = plan
        .placements
        .iter()
        .filter(|p| {
            p.change != Change::Unchanged || p.rollout.is_some() || !p.unschedulable.is_empty()
        })
        .collect();
    let unchanged = plan.placements.len() - shown.len();
    (shown, unchanged)
}

/// The feedback and condition rules an OCM key's works declare, one line per resource.
fn feedback_lines(p: &PlacementPlan) -> Vec<String> {
    p.feedback
        .iter()
        .map(|f| {
            let manifests = if f.manifests.is_empty() {
                "no manifest of the workload".to_string()
            } else {
                f.manifests.join(", ")
            };
            let mut parts = Vec::new();
            if !f.feedback.is_empty() {
                parts.push(format!("values {}", f.feedback.join(", ")));
            }
            if !f.conditions.is_empty() {
                parts.push(format!("conditions {}", f.conditions.join("; ")));
            }
            format!(
                "feedback of {} {} ({manifests}): {}",
                f.work,
                f.resource,
                parts.join("; ")
            )
        })
        .collect()
}

/// The clusters the head cannot place on, but for those already told as lost (with the reason).
fn unschedulable(p: &PlacementPlan) -> impl Iterator<Item = &ClusterReason> {
    p.unschedulable
        .iter()
        .filter(|u| !p.lost.iter().any(|m| m.cluster == u.cluster))
}

/// `added`, `removed`, `changed: policy, resources`, `manifests change`, …
/// `ResourceOverride/shop/web changed, ClusterResourceOverride/x added`.
fn override_names(p: &PlacementPlan) -> String {
    let o = &p.overrides;
    [
        (&o.changed, "changed"),
        (&o.added, "added"),
        (&o.removed, "removed"),
    ]
    .iter()
    .flat_map(|(names, what)| names.iter().map(move |n| format!("{n} {what}")))
    .collect::<Vec<_>>()
    .join(", ")
}

/// A consequence in words, for the summary: `deletes Namespace shop on 3 clusters (a, b, c)`.
fn consequence_text(c: &Consequence) -> String {
    let on = |clusters: &[String]| {
        format!(
            "on {} ({})",
            count(clusters.len(), "cluster", "clusters"),
            clusters.join(", ")
        )
    };
    match c {
        Consequence::NamespacesDeleted {
            namespaces,
            clusters,
        } => format!(
            "DELETES Namespace {} and everything in it {}",
            namespaces.join(", "),
            on(clusters)
        ),
        Consequence::WorkloadsDeleted { objects, clusters } => {
            format!("DELETES {} {}", objects.join(", "), on(clusters))
        }
        Consequence::RollsBack { run, to } => {
            format!("run {run} ROLLS BACK clusters to resource snapshot {to}")
        }
        Consequence::Stalls {
            condition,
            reason,
            message,
        } => format!("stalls: {condition} ({reason}): {message}"),
        Consequence::RunBlocked { run, message } => format!("run {run} cannot start: {message}"),
        Consequence::AwaitsRun { clusters } => format!(
            "{} wait for a new staged update run (none renders this commit)",
            count(*clusters, "cluster", "clusters")
        ),
        Consequence::ClustersLost { clusters } => format!("loses {}", clusters.join(", ")),
        Consequence::ClustersGained { clusters } => format!("gains {}", clusters.join(", ")),
        Consequence::Updates { clusters } => {
            format!("updates {}", count(*clusters, "cluster", "clusters"))
        }
    }
}

/// One line per placement with consequences, riskiest first (then by id): `crp/x (changed:
/// policy.numberOfClusters): stalls: ...; loses a`.
fn story_lines(plan: &Plan) -> Vec<(Risk, String)> {
    let mut told: Vec<&PlacementPlan> = plan
        .placements
        .iter()
        .filter(|p| !p.story.consequences.is_empty())
        .collect();
    told.sort_by(|a, b| b.story.risk.cmp(&a.story.risk).then(a.key.cmp(&b.key)));
    told.iter()
        .map(|p| {
            let what: Vec<String> = p.story.consequences.iter().map(consequence_text).collect();
            (
                p.story.risk,
                format!("{} ({}): {}", p.key, change_label(p), what.join("; ")),
            )
        })
        .collect()
}

/// The deletions of Namespaces and workloads, one line each, for above the fold.
fn deletion_lines(plan: &Plan) -> Vec<String> {
    plan.placements
        .iter()
        .flat_map(|p| {
            p.story
                .consequences
                .iter()
                .filter(|c| c.is_deletion())
                .map(move |c| format!("{}: {}", p.key, consequence_text(c)))
        })
        .collect()
}

fn risk_word(r: Risk) -> &'static str {
    match r {
        Risk::High => "high",
        Risk::Medium => "medium",
        Risk::Low => "low",
    }
}

fn change_label(p: &PlacementPlan) -> String {
    match p.change {
        Change::Added => "added".into(),
        Change::Removed => "removed".into(),
        Change::Changed => {
            // The overrides by name: "overrides" alone sends the reviewer to the JSON.
            let mut parts: Vec<String> = p
                .changed_fields
                .iter()
                .map(|f| match f.as_str() {
                    "overrides" => format!("overrides ({})", override_names(p)),
                    _ => f.clone(),
                })
                .collect();
            let r = &p.resources;
            if !(r.added.is_empty() && r.removed.is_empty() && r.changed.is_empty()) {
                parts.push("resources".into());
            }
            if parts.is_empty() {
                parts.push("scheduling".into());
            }
            format!("changed: {}", parts.join(", "))
        }
        Change::Unchanged => {
            if p.rollout.as_ref().is_some_and(|r| !r.updating.is_empty()) {
                "manifests change".into()
            } else if !p.unschedulable.is_empty() {
                "unschedulable clusters".into()
            } else {
                "unchanged".into()
            }
        }
    }
}

/// `policy snapshot 0 → 1` for the indices a head creates; nothing for a removed placement.
fn snapshot_lines(p: &PlacementPlan) -> Vec<String> {
    [
        ("policy snapshot", &p.policy_snapshot_index),
        ("resource snapshot", &p.resource_snapshot_index),
    ]
    .into_iter()
    .filter_map(|(name, t)| match (t.base, t.head) {
        (Some(b), Some(h)) if b != h => Some(format!("{name} {b} → {h}")),
        (None, Some(h)) => Some(format!("{name} {h} (new)")),
        _ => None,
    })
    .collect()
}

fn resources_line(p: &PlacementPlan, name: impl Fn(&str) -> String) -> Option<String> {
    let r = &p.resources;
    let mut parts = Vec::new();
    for (what, ids) in [
        ("added", &r.added),
        ("removed", &r.removed),
        ("changed", &r.changed),
    ] {
        if !ids.is_empty() {
            let ids: Vec<String> = ids.iter().map(|i| name(i)).collect();
            parts.push(format!("{what} {}", ids.join(", ")));
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The reason, then the scores on each side: `numberOfClusters 3 → 2, lowest score (scores:
/// affinity 32, topology spread -1 → none)`.
fn move_reason(m: &ClusterMove) -> String {
    let b = m.base_score.as_ref().and_then(score);
    let h = m.head_score.as_ref().and_then(score);
    let scores = match (b, h) {
        (None, None) => return m.reason.clone(),
        (Some(b), Some(h)) if b == h => b,
        (b, h) => format!(
            "{} → {}",
            b.as_deref().unwrap_or("none"),
            h.as_deref().unwrap_or("none")
        ),
    };
    format!("{} (scores: {scores})", m.reason)
}

/// `picked instead: a (affinity 84, topology spread 0), b (…)`: the scores a lost cluster lost to.
fn winners_line(pl: &PlacementPlan) -> Option<String> {
    if pl.winners.is_empty() {
        return None;
    }
    let each: Vec<String> = pl
        .winners
        .iter()
        .filter_map(|w| Some(format!("{} ({})", w.cluster, score(&w.score)?)))
        .collect();
    (!each.is_empty()).then(|| format!("picked instead: {}", each.join(", ")))
}

/// What the scores shown mean, once per placement that shows them: the numbers alone
/// (`topology spread -1 → 1`, `affinity 20 → 0`) do not say it.
fn score_legend(pl: &PlacementPlan) -> Vec<String> {
    let shown: Vec<&Score> = pl
        .gained
        .iter()
        .chain(&pl.lost)
        .flat_map(|m| [&m.base_score, &m.head_score])
        .flatten()
        .chain(pl.winners.iter().map(|w| &w.score))
        .collect();
    let mut out = Vec::new();
    if shown.iter().any(|s| s.topology_spread.is_some()) {
        out.push("topology spread score, per topology key: 1 when picking the cluster evens the spread out (its domain has the fewest of the placement's clusters), 0 when it leaves the skew as it is, -1 when it makes it larger (its domain has the most); far lower when it violates a ScheduleAnyway constraint. It is compared before the affinity score: the higher one wins whatever the affinity".to_string());
    }
    if shown.iter().any(|s| s.affinity.is_some()) {
        out.push("affinity score: the sum of the weights of the preferred cluster affinity terms (preferredDuringSchedulingIgnoredDuringExecution) the cluster matches, negative weights counting against it; among clusters with the same topology spread score the higher one is picked; on equal scores a cluster the placement already has, then the name that sorts last (as KubeFleet ranks them)".to_string());
    }
    out
}

fn score(s: &Score) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(a) = s.affinity {
        parts.push(format!("affinity {a}"));
    }
    if let Some(t) = s.topology_spread {
        parts.push(format!("topology spread {t}"));
    }
    if let Some(t) = s.total {
        parts.push(format!("score {t}"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn rollout_description(r: &RolloutImpact) -> String {
    if r.description.is_empty() {
        format!(
            "{}: {}",
            r.strategy,
            count(r.updating.len(), "cluster", "clusters") + " update"
        )
    } else {
        r.description.clone()
    }
}

/// A few words for the summary table.
fn rollout_brief(r: &RolloutImpact) -> String {
    let n = r.updating.len();
    if n == 0 {
        return "–".into();
    }
    let clusters = count(n, "cluster", "clusters");
    match r.strategy {
        Strategy::External => {
            let stages: Vec<&str> = r
                .stages
                .iter()
                .filter(|s| !stage_updating(s, r).is_empty())
                .map(|s| s.stage.as_str())
                .collect();
            if stages.is_empty() {
                format!("{clusters}, no staged run")
            } else {
                format!("{clusters} in stages {}", stages.join(", "))
            }
        }
        Strategy::RollingUpdate => match r.max_unavailable {
            Some(m) => format!("{clusters}, {m} at a time"),
            None => clusters,
        },
        other => format!("{clusters} ({other})"),
    }
}

/// `run r1 cannot be initialised: …`, `run r1 rolls back: …`.
fn run_note_line(n: &RunNote) -> String {
    let what = match n.kind {
        RunNoteKind::InitializationFailed => "cannot be initialised",
        RunNoteKind::NotInitializedYet => "cannot be initialised yet",
        RunNoteKind::RollsBack { .. } => "rolls back",
        RunNoteKind::DoesNotDeliver { .. } => "does not deliver this change",
    };
    format!("run {} {what}: {}", n.run, n.message)
}

/// The clusters of a stage this change updates: none when its run keeps an older snapshot.
fn stage_updating(s: &StageImpact, r: &RolloutImpact) -> Vec<String> {
    if !s.delivers {
        return vec![];
    }
    s.clusters
        .iter()
        .filter(|c| r.updating.contains(c))
        .cloned()
        .collect()
}

/// `stage telemetry-rollout-1/production: eastus-prod-1, … (2 at a time; 4 updating; after: TimedWait 1h)`.
fn stage_line(s: &StageImpact, r: &RolloutImpact) -> String {
    let updating = stage_updating(s, r);
    let mut notes = vec![format!("{} at a time", s.max_concurrency)];
    notes.push(if !s.delivers {
        "renders an earlier commit".into()
    } else if updating.is_empty() {
        "nothing to update".into()
    } else {
        format!("{} updating", updating.len())
    });
    if !s.before.is_empty() {
        notes.push(format!("before: {}", s.before.join(", ")));
    }
    if !s.after.is_empty() {
        notes.push(format!("after: {}", s.after.join(", ")));
    }
    format!(
        "stage {}/{}: {} ({})",
        s.run,
        s.stage,
        list_or_dash(&s.clusters),
        notes.join("; ")
    )
}

/// `4 objects removed`, or `3 objects changed: 1 added, 2 removed` when the changes differ.
fn objects_summary(c: &ClusterPlan) -> String {
    let by = |ch: Change| c.objects.iter().filter(|o| o.change == ch).count();
    let parts: Vec<(usize, &str)> = [
        (by(Change::Added), "added"),
        (by(Change::Removed), "removed"),
        (by(Change::Changed), "changed"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .collect();
    let all = count(c.objects.len(), "object", "objects");
    match parts.as_slice() {
        [(_, what)] => format!("{all} {what}"),
        _ => {
            let parts: Vec<String> = parts.iter().map(|(n, w)| format!("{n} {w}")).collect();
            format!("{all} changed: {}", parts.join(", "))
        }
    }
}

/// A snapshot index in the summary table: `0`, `0 → 1`, `0 (new)`, `–` (placement removed).
fn transition<T: std::fmt::Display + PartialEq>(t: &Transition<T>) -> String {
    match (&t.base, &t.head) {
        (Some(b), Some(h)) if b == h => h.to_string(),
        (Some(b), Some(h)) => format!("{b} → {h}"),
        (None, Some(h)) => format!("{h} (new)"),
        _ => "–".into(),
    }
}

fn sigil(c: Change) -> char {
    match c {
        Change::Added => '+',
        Change::Removed => '-',
        Change::Changed | Change::Unchanged => '~',
    }
}

fn change_word(c: Change) -> &'static str {
    match c {
        Change::Added => "added",
        Change::Removed => "removed",
        Change::Changed => "changed",
        Change::Unchanged => "unchanged",
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The first 12 characters of a commit id, as `gitfleet validate` prints it.
fn short(id: &str) -> &str {
    &id[..12.min(id.len())]
}

fn list_or_dash(items: &[String]) -> String {
    if items.is_empty() {
        "–".into()
    } else {
        items.join(", ")
    }
}

/// Up to [`TABLE_NAMES`] names, then `(+N more)`; `–` for none.
fn names<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = items.collect();
    if all.is_empty() {
        return "–".into();
    }
    let mut s = all[..all.len().min(TABLE_NAMES)].join(", ");
    if all.len() > TABLE_NAMES {
        let _ = write!(s, " (+{} more)", all.len() - TABLE_NAMES);
    }
    s
}

// Markdown escaping.

/// Text safe in a table cell: no pipes or line breaks, markdown escaped.
fn cell(s: &str) -> String {
    escape(s).replace('\n', " ")
}

/// Characters that would start markup or HTML in running text.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' => {
                out.push('\\');
                out.push(ch);
            }
            _ => out.push(ch),
        }
    }
    out
}

fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An inline code span that holds `s` whatever backticks it contains.
fn code(s: &str) -> String {
    let ticks = "`".repeat(longest_run(s, '`') + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{}{pad}{ticks}", s.replace('\n', " "))
}

/// A code fence longer than any run of backticks in the content, so no line can close it.
fn fence_for(s: &str) -> String {
    "`".repeat(3.max(longest_run(s, '`') + 1))
}

fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for ch in s.chars() {
        run = if ch == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// ANSI styling, or none.
struct Paint(bool);

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn red(&self, s: &str) -> String {
        self.wrap("31", s)
    }
    fn green(&self, s: &str) -> String {
        self.wrap("32", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    fn red_bold(&self, s: &str) -> String {
        self.wrap("1;31", s)
    }
    fn change(&self, c: Change, s: &str) -> String {
        match c {
            Change::Added => self.green(s),
            Change::Removed => self.red(s),
            Change::Changed | Change::Unchanged => self.yellow(s),
        }
    }
    fn diff_line(&self, l: &str) -> String {
        if l.starts_with("+++") || l.starts_with("---") {
            self.bold(l)
        } else if l.starts_with('+') {
            self.green(l)
        } else if l.starts_with('-') {
            self.red(l)
        } else if l.starts_with("@@") {
            self.wrap("36", l)
        } else {
            l.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PlacementKey, PlacementKind};
    use crate::plan::{ResourceChanges, Summary};

    fn object(i: usize) -> ObjectDiff {
        let body: String = (0..40)
            .map(|l| format!("+line {l} of object {i}\n"))
            .collect();
        ObjectDiff {
            key: crate::model::ObjectKey::new("", "ConfigMap", Some("app"), &format!("config-{i}")),
            object: format!("ConfigMap/app/config-{i}"),
            placement: "crp/app".parse().unwrap(),
            change: Change::Added,
            source: None,
            diff: format!("--- base/x\n+++ head/x\n@@ -0,0 +1,40 @@\n{body}").into(),
        }
    }

    fn placement(name: &str, change: Change) -> PlacementPlan {
        PlacementPlan {
            feedback: vec![],
            key: PlacementKey::new(PlacementKind::ClusterResourcePlacement, None, name),
            change,
            changed_fields: vec![],
            policy_snapshot_index: Transition {
                base: None,
                head: Some(0),
            },
            resource_snapshot_index: Transition {
                base: None,
                head: Some(0),
            },
            resources: ResourceChanges::default(),
            overrides: Default::default(),
            gained: vec![],
            lost: vec![],
            winners: vec![],
            kept: vec![],
            unschedulable: vec![],
            condition: None,
            rollout: None,
            story: Default::default(),
        }
    }

    /// 20 clusters with 3 objects of ~40 lines each: far more than a few kilobytes.
    fn big_plan() -> Plan {
        let clusters: Vec<ClusterPlan> = (0..20)
            .map(|c| ClusterPlan {
                cluster: format!("member-{c:02}"),
                objects: (0..3).map(|i| object(c * 3 + i)).collect(),
                errors: vec![],
            })
            .collect();
        Plan {
            base: "a".repeat(40),
            head: "b".repeat(40),
            errors: vec![],
            head_signature: None,
            held: None,
            warnings: vec![],
            summary: Summary {
                placements_added: 1,
                clusters_with_manifest_changes: 20,
                objects_added: 60,
                ..Summary::default()
            },
            placements: vec![placement("app", Change::Added)],
            clusters,
            evictions: vec![],
        }
    }

    fn fences(md: &str) -> usize {
        md.lines().filter(|l| l.starts_with("```")).count()
    }

    #[test]
    fn markdown_cap_cuts_whole_diffs_and_says_so() {
        let plan = big_plan();
        let full = markdown(&plan, usize::MAX);
        assert!(full.len() > 20_000, "the plan is big: {}", full.len());
        assert!(!full.contains("[!NOTE]"), "nothing is cut without a cap");
        assert_eq!(fences(&full), 2 * 60);

        for max in [1_000, 3_000, 8_000, 15_000] {
            let md = markdown(&plan, max);
            assert!(md.len() <= max, "{} > {max}", md.len());
            assert_eq!(fences(&md) % 2, 0, "balanced fences at {max}");
            assert_eq!(
                md.matches("<details>").count(),
                md.matches("</details>").count()
            );
            assert!(
                md.contains("| `crp/app` | added | – | – | 0 (new) | 0 (new) | – |"),
                "the table is kept"
            );
            let note = md.lines().last().unwrap();
            assert!(
                note.contains("left out") && note.contains(SEE_CLUSTER),
                "{note}"
            );
            let shown = fences(&md) / 2;
            assert!(
                note.contains(&format!("the diffs of {} objects", 60 - shown)),
                "{note}"
            );
        }
    }

    /// A work's declared feedback is one line per resource, in text and in markdown.
    #[test]
    fn declared_feedback_is_listed_under_its_placement() {
        let mut pl = placement("web", Change::Added);
        pl.feedback = vec![super::super::DeclaredFeedback {
            work: "ManifestWork alpha/web".into(),
            resource: "deployments.apps default/web".into(),
            manifests: vec!["Deployment default/web".into()],
            feedback: vec!["WellKnownStatus".into(), "image=.spec.image".into()],
            conditions: vec!["Ready: CEL true".into()],
        }];
        let line = "feedback of ManifestWork alpha/web deployments.apps default/web (Deployment default/web): values WellKnownStatus, image=.spec.image; conditions Ready: CEL true";
        let mut text = String::new();
        text_placement(&mut text, &Paint(false), &pl).unwrap();
        assert!(text.contains(&format!("  {line}\n")), "{text}");
        assert!(markdown_placement(&pl).contains(&format!("- {line}\n")));
    }

    #[test]
    fn markdown_cap_that_fits_everything_adds_no_note() {
        let plan = big_plan();
        let full = markdown(&plan, usize::MAX);
        assert!(
            markdown(&plan, full.len()) == full,
            "the full plan fits its own length"
        );
    }

    #[test]
    fn fences_outgrow_backticks_in_the_diff() {
        let mut o = object(0);
        o.diff = "@@ -1 +1 @@\n ```\n-a\n+b\n".into();
        let md = markdown_object(&o);
        assert!(md.contains("````diff\n"), "{md}");
        assert!(md.contains("\n````\n"), "{md}");
    }

    #[test]
    fn text_is_plain_without_colour_and_coloured_with_it() {
        let plan = big_plan();
        assert!(!text(&plan, false).contains('\x1b'));
        assert!(text(&plan, true).contains("\x1b[32m+line 0 of object 0\x1b[0m"));
    }

    /// A plan is written piece by piece, so printing it never holds a second copy of its diffs
    /// (the text of a large commit's plan is several times the commit).
    #[test]
    fn text_and_markdown_are_written_in_pieces_never_whole() {
        /// The largest single piece written, and all of them together.
        struct Pieces(usize, usize);
        impl fmt::Write for Pieces {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                self.0 = self.0.max(s.len());
                self.1 += s.len();
                Ok(())
            }
        }
        let plan = big_plan();
        let diff = plan
            .clusters
            .iter()
            .flat_map(|c| &c.objects)
            .map(|o| o.diff.len())
            .max()
            .unwrap();
        let mut text = Pieces(0, 0);
        write_text(&mut text, &plan, true).unwrap();
        let mut full = Pieces(0, 0);
        write_markdown(&mut full, &plan, usize::MAX).unwrap();
        let mut capped = Pieces(0, 0);
        write_markdown(&mut capped, &plan, 15_000).unwrap();
        for (name, w) in [("text", text), ("markdown", full), ("capped", capped)] {
            assert!(w.1 > 10 * diff, "{name}: {} bytes in all", w.1);
            assert!(w.0 <= diff, "{name}: one piece of {} bytes", w.0);
        }
    }

    #[test]
    fn escaping() {
        assert_eq!(cell("a|b <c>"), "a\\|b &lt;c&gt;");
        assert_eq!(code("x `y` z"), "``x `y` z``");
        assert_eq!(code("`y`"), "`` `y` ``");
    }
}
