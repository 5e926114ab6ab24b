// One table of callbacks as the API describes their delivery (GET /jobs/{job_id}/callbacks,
// GET /callbacks?state=dead): shared by a job's deliveries panel and the dead letters page.
import { el, scrolling, table } from "../dom.js";
import { jobHref } from "../routes.js";
import { timeOf } from "../format.js";

// The receiver's last answer: the producer's words for it (they name the status), else the
// status alone.
function lastAnswer(delivery) {
  if (delivery.last_error) {
    return el("span", { class: "answer" }, delivery.last_error);
  }
  if (delivery.last_status !== undefined) {
    return `HTTP ${delivery.last_status}`;
  }
  return el("span", { class: "muted" }, "–");
}

function when(delivery) {
  const moments = [
    ["delivered", delivery.delivered_at],
    ["dead since", delivery.dead_at],
    ["next attempt", delivery.next_attempt_at],
  ];
  const found = moments.find(([, at]) => at !== undefined);
  return found ? el("span", {}, `${found[0]} `, timeOf(found[1])) : "–";
}

export function deliveriesTable(caption, deliveries, { withJob = false } = {}) {
  const columns = [
    ["Event", (d) => d.type],
    ["State", (d) => el("span", { class: `delivery delivery-${d.state}` }, d.state)],
    ["Attempts", (d) => `${d.attempts} of ${d.max_attempts}`],
    ["Last answer", lastAnswer],
    ["When", when],
  ];
  if (withJob) {
    columns.unshift(["Job", (d) => el("a", { href: jobHref(d.job_id), class: "id" }, d.job_id)]);
  }
  return scrolling(caption, table(caption, columns, deliveries, "deliveries stacked"));
}
