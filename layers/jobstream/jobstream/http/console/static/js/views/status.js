// A job's status as a badge (its word is always shown: colour only repeats it).
import { el } from "../dom.js";

export const STATUSES = ["queued", "running", "succeeded", "failed", "cancelled", "expired"];
export const FINAL_STATUSES = new Set(["succeeded", "failed", "cancelled", "expired"]);

export function statusBadge(status) {
  const known = STATUSES.includes(status) ? status : "unknown";
  return el("span", { class: `status status-${known}` }, status);
}

export function labelList(labels) {
  const entries = Object.entries(labels ?? {});
  if (entries.length === 0) {
    return null;
  }
  return el(
    "ul",
    { class: "labels" },
    entries.map(([name, value]) => el("li", {}, `${name}=${value}`)),
  );
}

const STATUS_SENTENCES = {
  queued: "The job is queued",
  running: "The job is running",
  succeeded: "The job succeeded",
  failed: "The job failed",
  cancelled: "The job was cancelled",
  expired: "The job expired",
};

// "The job succeeded." / "The job is running." for a status.
export function statusSentence(status) {
  return STATUS_SENTENCES[status] ?? `The job is ${status}`;
}
