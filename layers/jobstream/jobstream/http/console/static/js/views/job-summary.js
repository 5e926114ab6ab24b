// The job page's summary and progress panels.
import { el, facts, fill, section } from "../dom.js";
import { duration, timeOf } from "../format.js";
import { jobsHref } from "../routes.js";
import { FINAL_STATUSES, labelList, statusBadge } from "./status.js";

export function summaryPanel() {
  const body = el("div");
  return {
    element: section("Summary", body),
    update({ job }, { jobChanged }) {
      if (!jobChanged) {
        return;
      }
      const lease = job.lease_active
        ? el("span", {}, "held until ", timeOf(job.lease_expires_at))
        : "none";
      fill(
        body,
        facts([
          ["Status", statusBadge(job.status)],
          ["Job type", job.job_type],
          ["Job id", el("span", { class: "id" }, job.job_id)],
          ["Idempotency key", el("span", { class: "id" }, job.idempotency_key)],
          [
            "Correlation id",
            job.correlation_id
              ? el(
                  "a",
                  { href: jobsHref({ correlation_id: job.correlation_id }) },
                  job.correlation_id,
                )
              : null,
          ],
          ["Labels", labelList(job.labels)],
          ["Created", timeOf(job.created_at)],
          ["Started", timeOf(job.started_at)],
          ["Last update", timeOf(job.updated_at)],
          ["Heartbeat", timeOf(job.heartbeat_at)],
          ["Deadline", timeOf(job.deadline_at)],
          ["Attempts", String(job.attempt ?? 0)],
          ["Lease", FINAL_STATUSES.has(job.status) ? null : lease],
        ]),
      );
    },
  };
}

// The job's progress as a bar: empty while queued, moving while running (the executor reports
// a stage and a message, not a fraction), full once final; and the share of its deadline used.
export function progressPanel() {
  const bar = el("progress", { id: "job-progress", max: "1" });
  const stage = el("p", { class: "progress-stage", id: "job-progress-label" });
  const deadline = el("meter", { id: "job-deadline", min: "0", max: "1", value: "0" });
  const deadlineText = el("span", { class: "muted" });
  const deadlineRow = el(
    "div",
    { class: "deadline" },
    el("label", { for: "job-deadline" }, "Time used of the deadline"),
    deadline,
    deadlineText,
  );
  bar.setAttribute("aria-labelledby", "job-progress-label");
  return {
    element: section("Progress", stage, bar, deadlineRow),
    update({ job, serverTime }, { jobChanged }) {
      if (jobChanged) {
        const progress = job.progress ?? {};
        fill(
          stage,
          el("strong", {}, progress.stage ?? job.status),
          progress.message ? ` — ${progress.message}` : "",
        );
        if (job.status === "running") {
          bar.removeAttribute("value");
        } else {
          bar.setAttribute("value", FINAL_STATUSES.has(job.status) ? "1" : "0");
        }
      }
      const active = !FINAL_STATUSES.has(job.status) && job.deadline_at;
      deadlineRow.hidden = !active;
      if (active) {
        const budget = job.deadline_at - job.created_at;
        const used = Math.min(Math.max(serverTime - job.created_at, 0), budget);
        deadline.setAttribute("value", budget > 0 ? String(used / budget) : "1");
        deadlineText.textContent = `${duration(used)} of ${duration(budget)}`;
      }
    },
  };
}
