// The job page's deliveries: each callback of the job, its state, attempts and the receiver's
// last answer (GET /jobs/{job_id}/callbacks), read again whenever the page updates; and, when
// some are dead, a button that sends them again after a confirmation (POST /callbacks/redrive).
import { apiGet, jobPath } from "../api.js";
import { el, fill, section } from "../dom.js";
import { timeOf } from "../format.js";
import { deliveriesTable } from "./deliveries-table.js";
import { redriveOnClick } from "./redrive.js";

// How the endpoint (the tenant's callbacks to this origin) stands: healthy, paused after
// sustained failure (one probe an interval, the rest held), disabled after 410 Gone.
function endpointLine(endpoint) {
  if (!endpoint) {
    return null;
  }
  const parts = [
    "Endpoint ",
    el("code", {}, endpoint.origin),
    ": ",
    el("span", { class: `delivery endpoint-${endpoint.health}` }, endpoint.health),
  ];
  if (endpoint.since !== undefined && endpoint.health !== "healthy") {
    parts.push(" since ", timeOf(endpoint.since));
  }
  if (endpoint.next_probe_at !== undefined) {
    parts.push("; next probe ", timeOf(endpoint.next_probe_at));
  }
  if (endpoint.last_error && endpoint.health !== "healthy") {
    parts.push(el("span", { class: "answer" }, ` — ${endpoint.last_error}`));
  }
  return el("p", { class: "endpoint" }, parts);
}

export function deliveriesPanel({ jobId }) {
  const body = el("div", {}, el("p", { class: "muted" }, "Loading the deliveries…"));
  const redrive = el("button", { type: "button", class: "danger" }, "Send dead callbacks again");
  const outcome = el("p", { class: "alert", role: "status" });
  redrive.hidden = true;
  let latest = null;

  async function load() {
    latest = await apiGet(jobPath(jobId, "/callbacks"));
    const { callbacks } = latest;
    const dead = callbacks.filter((delivery) => delivery.state === "dead").length;
    redrive.hidden = dead === 0;
    if (!latest.callback_url) {
      fill(body, el("p", { class: "muted" }, "No callback URL: the consumer reads the events."));
      return;
    }
    fill(
      body,
      el("p", {}, "Callbacks to ", el("code", {}, latest.callback_url)),
      endpointLine(latest.endpoint),
      callbacks.length
        ? deliveriesTable("Callbacks, in event order", callbacks)
        : el("p", { class: "muted" }, "No callback yet."),
    );
  }

  redriveOnClick(redrive, outcome, {
    question: "Send the dead callbacks again?",
    detail: `Each dead callback of job ${jobId} gets a fresh budget of attempts and is sent again.`,
    confirmText: "Send them again",
    body: { job_id: jobId },
    after: load,
  });

  return {
    element: section("Deliveries", body, redrive, outcome),
    update(_state, { jobChanged, newEvents }) {
      if (latest === null || jobChanged || newEvents.length) {
        load().catch((error) => {
          if (error.name !== "AbortError") {
            fill(body, el("p", { class: "alert" }, `Could not load: ${error.describe()}`));
          }
        });
      }
    },
  };
}
