// A job's page: its panels, filled from GET /jobs/{job_id} and its event stream, and kept up to
// date by a short poll of both while the job is queued or running.
import { apiGet, eventsAfter, jobPath } from "../api.js";
import { el, fill } from "../dom.js";
import { actionsPanel } from "./job-actions.js";
import { errorPanel, resultPanel } from "./job-result.js";
import { deliveriesPanel } from "./job-deliveries.js";
import { progressPanel, summaryPanel } from "./job-summary.js";
import { timelinePanel } from "./job-timeline.js";
import { FINAL_STATUSES, statusSentence } from "./status.js";

export const POLL_MS = 2000;
const MAX_POLL_MS = 16000;

// The page's parts. Each is made by create({ jobId, refresh }) and is
// { element, update(state, changes) }, where state is { job, events, unacked, serverTime } and
// changes is { jobChanged, newEvents }; `refresh()` updates the whole page now. A panel that
// needs calls of its own (the deliveries) makes them in its update.
const HEADER = [actionsPanel];
const PANELS = [
  summaryPanel,
  progressPanel,
  errorPanel,
  resultPanel,
  timelinePanel,
  deliveriesPanel,
];

// Resolves true after `ms`, or false as soon as the page is left.
function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = window.setTimeout(() => resolve(true), ms);
    signal.addEventListener(
      "abort",
      () => {
        window.clearTimeout(timer);
        resolve(false);
      },
      { once: true },
    );
  });
}

function liveText(status) {
  return FINAL_STATUSES.has(status)
    ? `${statusSentence(status)}: it is final.`
    : `${statusSentence(status)}: this page updates itself every ${POLL_MS / 1000} s.`;
}

function jobPage(jobId, { signal, announce }) {
  const state = { job: null, events: [], unacked: 0, serverTime: 0 };
  const live = el("p", { class: "live muted", id: "job-live" });
  let queue = Promise.resolve();
  const page = { state, live, parts: [] };

  async function load() {
    const job = await apiGet(jobPath(jobId), {}, { signal });
    // After the job: a final job's terminal event commits with its status, so it is read too.
    const events = await eventsAfter(jobId, state.events.at(-1)?.event_id, { signal });
    const previous = state.job;
    const changes = {
      jobChanged:
        !previous || previous.updated_at !== job.updated_at || previous.status !== job.status,
      newEvents: events.events,
    };
    Object.assign(state, { job, unacked: events.unacked, serverTime: events.serverTime });
    state.events.push(...events.events);
    for (const part of page.parts) {
      part.update(state, changes);
    }
    live.textContent = liveText(job.status);
    if (previous && previous.status !== job.status) {
      announce(`${statusSentence(job.status)}.`);
    }
  }

  // One update at a time (the poll's and an action's), so no event is appended twice.
  page.refresh = () => {
    const next = queue.then(load);
    queue = next.catch(() => {});
    return next;
  };
  const context = { jobId, refresh: page.refresh };
  page.header = HEADER.map((create) => create(context));
  page.panels = PANELS.map((create) => create(context));
  page.parts = [...page.header, ...page.panels];
  return page;
}

async function poll(page, signal) {
  let delay = POLL_MS;
  while (!FINAL_STATUSES.has(page.state.job.status)) {
    if (!(await pause(delay, signal))) {
      return;
    }
    try {
      await page.refresh();
      delay = POLL_MS;
    } catch (error) {
      if (error.name === "AbortError" || error.status === 401) {
        return;
      }
      delay = Math.min(delay * 2, MAX_POLL_MS);
      page.live.textContent = `Could not refresh: ${error.describe()}. Trying again in ${delay / 1000} s.`;
    }
  }
}

export async function renderJob(main, route, context) {
  const { jobId } = route;
  const heading = el("h1", { tabindex: "-1" }, "Job ", el("span", { class: "id" }, jobId));
  fill(main, heading, el("p", { "aria-busy": "true" }, "Loading the job…"));
  const page = jobPage(jobId, context);
  try {
    await page.refresh();
  } catch (error) {
    if (error.status !== 404) {
      throw error;
    }
    fill(
      main,
      heading,
      el(
        "p",
        { class: "alert", role: "alert" },
        `Not found: ${error.describe()}. No job with this id is visible to this token.`,
      ),
    );
    return;
  }
  fill(
    main,
    heading,
    page.live,
    page.header.map((part) => part.element),
    el(
      "div",
      { class: "panels" },
      page.panels.map((part) => part.element),
    ),
  );
  // Not awaited: the page is shown; the poll runs until the job is final or the page is left.
  poll(page, context.signal);
}
