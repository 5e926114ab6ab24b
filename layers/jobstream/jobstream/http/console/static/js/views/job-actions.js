// The job page's actions, each through the API's own route and after a confirmation: cancel a
// queued or running job (POST /jobs/{job_id}/cancel). The redrive of a job's dead-lettered
// callbacks joins them with the API's route for it.
import { apiPost, jobPath } from "../api.js";
import { el } from "../dom.js";
import { FINAL_STATUSES } from "./status.js";

// A modal question: resolves true when the person confirms, false on "keep" or Escape.
function confirmation(question, detail, confirmText, keepText) {
  const confirm = el("button", { type: "button", class: "danger" }, confirmText);
  const keep = el("button", { type: "button", class: "secondary" }, keepText);
  const dialog = el(
    "dialog",
    {
      class: "confirm",
      "aria-labelledby": "confirm-question",
      "aria-describedby": "confirm-detail",
    },
    el("h2", { id: "confirm-question" }, question),
    el("p", { id: "confirm-detail" }, detail),
    el("div", { class: "inline" }, keep, confirm),
  );
  document.body.append(dialog);
  return new Promise((resolve) => {
    confirm.addEventListener("click", () => dialog.close("confirm"));
    keep.addEventListener("click", () => dialog.close("keep"));
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "confirm");
    });
    dialog.showModal();
    keep.focus();
  });
}

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
