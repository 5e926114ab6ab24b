// The job page's timeline: every event in order, with its time and its offset from the first.
// New events are appended as the page polls; nothing already shown is rebuilt.
import { el, facts, json, section } from "../dom.js";
import { duration, timeOf } from "../format.js";

// What an event says beyond its type: a progress event's stage and message, a final one's
// result or error.
function outcomeNote(event) {
  const payload = event.payload ?? {};
  if (payload.progress) {
    const { stage, message } = payload.progress;
    return el(
      "p",
      { class: "event-note" },
      el("strong", {}, stage),
      message ? ` — ${message}` : "",
    );
  }
  if (payload.error) {
    return el(
      "p",
      { class: "event-note" },
      el("code", {}, payload.error.code),
      ` ${payload.error.message}`,
    );
  }
  const result = payload.result;
  if (result && Array.isArray(result.candidates)) {
    const scanned = result.scanned === undefined ? "" : ` from ${result.scanned} scanned`;
    return el("p", { class: "event-note" }, `${result.candidates.length} candidate(s)${scanned}`);
  }
  if (result && Array.isArray(result.assets)) {
    return el("p", { class: "event-note" }, `${result.assets.length} asset(s)`);
  }
  return null;
}

function eventItem(event, first) {
  const kind = String(event.type).replace(/^job\./, "");
  return el(
    "li",
    { class: `event event-${kind.replace(/[^a-z]/g, "")}` },
    el(
      "div",
      { class: "event-head" },
      el("span", { class: "event-type" }, event.type),
      timeOf(event.at),
      el("span", { class: "muted" }, `+${duration(event.at - first)}`),
    ),
    outcomeNote(event),
    el(
      "details",
      {},
      el("summary", {}, "Event details"),
      facts([
        ["Event id", el("span", { class: "id" }, event.event_id)],
        ["At (epoch ms)", String(event.at)],
      ]),
      event.payload?.detail ? json(event.payload.detail) : null,
    ),
  );
}

export function timelinePanel() {
  const list = el("ol", { class: "timeline", "aria-label": "Events, oldest first" });
  const counts = el("p", { class: "muted" });
  let first = null;
  return {
    element: section("Timeline", counts, list),
    update({ events, unacked }, { newEvents }) {
      if (events.length && first === null) {
        first = events[0].at;
      }
      list.append(...newEvents.map((event) => eventItem(event, first)));
      counts.textContent = `${events.length} event(s); ${unacked} not yet acknowledged by the consumer.`;
    },
  };
}
