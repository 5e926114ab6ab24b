// The jobs list: filters by status, correlation id and idempotency key, pages by cursor.
import { apiGet } from "../api.js";
import { el, fill, table } from "../dom.js";
import { ageOf } from "../format.js";
import { jobHref, jobsHref } from "../routes.js";
import { STATUSES, labelList, statusBadge } from "./status.js";

const PAGE_SIZES = ["25", "50", "100"];
const MAX_PAGE_SIZE = 500; // the API's

function readFilters(params) {
  // The form offers a few page sizes; an address may name any the API takes.
  const limit = Number.parseInt(params.get("limit") ?? "", 10);
  return {
    status: STATUSES.includes(params.get("status")) ? params.get("status") : "",
    correlation_id: params.get("correlation_id") ?? "",
    idempotency_key: params.get("idempotency_key") ?? "",
    limit: limit >= 1 && limit <= MAX_PAGE_SIZE ? String(limit) : PAGE_SIZES[0],
    cursor: params.get("cursor") ?? "",
  };
}

function field(id, label, control) {
  return el("div", { class: "field" }, el("label", { for: id }, label), control);
}

function select(id, options, selected) {
  return el(
    "select",
    { id, name: id },
    options.map(([value, text]) => el("option", { value, selected: value === selected }, text)),
  );
}

function filterForm(filters) {
  const form = el(
    "form",
    { class: "filters", "aria-label": "Filter jobs" },
    field(
      "status",
      "Status",
      select("status", [["", "any"], ...STATUSES.map((s) => [s, s])], filters.status),
    ),
    field(
      "correlation_id",
      "Correlation id",
      el("input", { id: "correlation_id", name: "correlation_id", value: filters.correlation_id }),
    ),
    field(
      "idempotency_key",
      "Idempotency key",
      el("input", {
        id: "idempotency_key",
        name: "idempotency_key",
        value: filters.idempotency_key,
      }),
    ),
    field(
      "limit",
      "Per page",
      select(
        "limit",
        PAGE_SIZES.map((n) => [n, n]),
        filters.limit,
      ),
    ),
    el("div", { class: "field field-actions" }, el("button", { type: "submit" }, "Show jobs")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const chosen = Object.fromEntries([...data.entries()].map(([k, v]) => [k, String(v).trim()]));
    if (chosen.limit === PAGE_SIZES[0]) {
      delete chosen.limit;
    }
    const target = jobsHref(chosen);
    if (window.location.hash === target) {
      window.dispatchEvent(new Event("hashchange"));
    } else {
      window.location.hash = target;
    }
  });
  return form;
}

function jobsTable(jobs, now) {
  return table(
    "Jobs, newest first",
    [
      ["Job", (job) => el("a", { href: jobHref(job.job_id), class: "id" }, job.job_id)],
      ["Status", (job) => statusBadge(job.status)],
      ["Type", (job) => job.job_type],
      ["Age", (job) => ageOf(job.created_at, now)],
      [
        "Correlation id",
        (job) =>
          job.correlation_id
            ? el(
                "a",
                { href: jobsHref({ correlation_id: job.correlation_id }) },
                job.correlation_id,
              )
            : el("span", { class: "muted" }, "–"),
      ],
      ["Labels", (job) => labelList(job.labels) ?? el("span", { class: "muted" }, "–")],
    ],
    jobs,
    "jobs stacked",
  );
}

function pager(filters, nextCursor) {
  const links = [];
  if (filters.cursor) {
    links.push(el("a", { href: jobsHref({ ...filters, cursor: "" }) }, "First page"));
  }
  if (nextCursor) {
    links.push(
      el("a", { href: jobsHref({ ...filters, cursor: nextCursor }), rel: "next" }, "Next page"),
    );
  }
  return links.length ? el("nav", { class: "pager", "aria-label": "Pages of jobs" }, links) : null;
}

export async function renderJobs(main, route, { signal }) {
  const filters = readFilters(route.params);
  const results = el(
    "div",
    { class: "results", "aria-busy": "true" },
    el("p", {}, "Loading jobs…"),
  );
  fill(main, el("h1", { tabindex: "-1" }, "Jobs"), filterForm(filters), results);
  const page = await apiGet("/jobs", filters, { signal });
  const empty = page.next_cursor
    ? "No job on this page; more may follow on the next."
    : "No job matches.";
  fill(
    results,
    page.jobs.length ? jobsTable(page.jobs, page.server_time) : el("p", { class: "empty" }, empty),
    pager(filters, page.next_cursor),
  );
  results.setAttribute("aria-busy", "false");
}
