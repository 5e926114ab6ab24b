// The tenant's dead callbacks (GET /callbacks?state=dead), oldest death first, a page at a
// time; a button sends them all again after a confirmation (POST /callbacks/redrive).
import { apiGet } from "../api.js";
import { el, fill } from "../dom.js";
import { deliveriesTable } from "./deliveries-table.js";
import { redriveOnClick } from "./redrive.js";

function pager(cursor, nextCursor) {
  const links = [];
  if (cursor) {
    links.push(el("a", { href: "#/dead-letters" }, "First page"));
  }
  if (nextCursor) {
    const query = new URLSearchParams({ cursor: nextCursor });
    links.push(el("a", { href: `#/dead-letters?${query}`, rel: "next" }, "Next page"));
  }
  return links.length ? el("nav", { class: "pager", "aria-label": "Pages" }, links) : null;
}

export async function renderDeadLetters(main, route, { signal, announce }) {
  const cursor = route.params.get("cursor") ?? "";
  const heading = el("h1", { tabindex: "-1" }, "Dead letters");
  const results = el("div", { class: "results", "aria-busy": "true" }, el("p", {}, "Loading…"));
  const redrive = el("button", { type: "button", class: "danger" }, "Send all again");
  const outcome = el("p", { class: "alert", role: "status" });
  fill(
    main,
    heading,
    el(
      "p",
      { class: "muted" },
      "Callbacks whose attempts were all spent. Sent again, each gets a fresh budget.",
    ),
    results,
    redrive,
    outcome,
  );
  const page = await apiGet("/callbacks", { state: "dead", cursor }, { signal });
  redrive.hidden = page.callbacks.length === 0;
  fill(
    results,
    page.callbacks.length
      ? deliveriesTable("Dead callbacks, oldest first", page.callbacks, { withJob: true })
      : el("p", { class: "empty" }, "No dead callbacks."),
    pager(cursor, page.next_cursor),
  );
  results.setAttribute("aria-busy", "false");
  redriveOnClick(redrive, outcome, {
    question: "Send every dead callback again?",
    detail: "Each of this tenant's dead callbacks gets a fresh budget of attempts and is sent again.",
    confirmText: "Send them all again",
    body: {},
    after: () => {
      announce(outcome.textContent);
      redrive.hidden = true;
      fill(results, el("p", { class: "empty" }, "No dead callbacks."));
    },
  });
}
