// The job page's actions, each through the API's own route and after a confirmation: cancel a
// queued or running job (POST /jobs/{job_id}/cancel). The redrive of a job's dead callbacks is
// in its deliveries panel (job-deliveries.js).
import { apiPost, jobPath } from "../api.js";
import { el } from "../dom.js";
import { confirmation } from "./confirm.js";
import { FINAL_STATUSES } from "./status.js";

export function actionsPanel({ jobId, refresh }) {
  const cancel = el("button", { type: "button", class: "danger" }, "Cancel job");
  const outcome = el("p", { class: "alert", role: "alert" });
  const element = el("div", { class: "actions" }, cancel, outcome);
  element.hidden = true;
  cancel.addEventListener("click", async () => {
    const confirmed = await confirmation(
      "Cancel this job?",
      `Job ${jobId} stops at its next checkpoint and ends cancelled (cancelled_by_consumer). ` +
        "This cannot be undone.",
      "Cancel the job",
      "Keep it",
    );
    if (!confirmed) {
      cancel.focus();
      return;
    }
    cancel.disabled = true;
    outcome.textContent = "";
    try {
      await apiPost(jobPath(jobId, "/cancel"));
      await refresh();
    } catch (error) {
      cancel.disabled = false;
      if (error.name !== "AbortError") {
        outcome.textContent = `Could not cancel: ${error.describe()}`;
      }
    }
  });
  return {
    element,
    update({ job }) {
      element.hidden = FINAL_STATUSES.has(job.status);
    },
  };
}
