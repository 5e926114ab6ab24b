// A job's page: its panels, filled from GET /jobs/{job_id} and its event stream, and kept up to
// date by a short poll of both while the job is queued or running.
import { apiGet, eventsAfter, jobPath } from "../api.js";
import { el, fill } from "../dom.js";
import { errorPanel, resultPanel } from "./job-result.js";
import { progressPanel, summaryPanel } from "./job-summary.js";
import { timelinePanel } from "./job-timeline.js";
import { FINAL_STATUSES, statusSentence } from "./status.js";

export const POLL_MS = 2000;
const MAX_POLL_MS = 16000;

// The panels of a job's page, in order: each is { element, update(state, changes) }, where
// state is { job, events, unacked, serverTime } and changes is { jobChanged, newEvents }. A
// panel that needs calls of its own (the deliveries of issue 27) makes them in its update.
const PANELS = [summaryPanel, progressPanel, errorPanel, resultPanel, timelinePanel];

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

async function refresh(jobId, state, panels, signal) {
  const job = await apiGet(jobPath(jobId), {}, { signal });
  // After the job: a final job's terminal event is committed with its status, so it is read too.
  const page = await eventsAfter(jobId, state.events.at(-1)?.event_id, { signal });
  const previous = state.job;
  const changes = {
    jobChanged:
      !previous || previous.updated_at !== job.updated_at || previous.status !== job.status,
    newEvents: page.events,
  };
  Object.assign(state, { job, unacked: page.unacked, serverTime: page.serverTime });
  state.events.push(...page.events);
  for (const panel of panels) {
    panel.update(state, changes);
  }
}

async function poll(jobId, state, panels, live, { signal, announce }) {
  let delay = POLL_MS;
  while (!FINAL_STATUSES.has(state.job.status)) {
    if (!(await pause(delay, signal))) {
      return;
    }
    const before = state.job.status;
    try {
      await refresh(jobId, state, panels, signal);
      delay = POLL_MS;
      live.textContent = liveText(state.job.status);
    } catch (error) {
      if (error.name === "AbortError" || error.status === 401) {
        return;
      }
      delay = Math.min(delay * 2, MAX_POLL_MS);
      live.textContent = `Could not refresh: ${error.describe()}. Trying again in ${delay / 1000} s.`;
    }
    if (state.job.status !== before) {
      announce(`${statusSentence(state.job.status)}.`);
    }
  }
  live.textContent = liveText(state.job.status);
}

export async function renderJob(main, route, context) {
  const { jobId } = route;
  const live = el("p", { class: "live muted", id: "job-live" });
  const panels = PANELS.map((create) => create());
  const heading = el("h1", { tabindex: "-1" }, "Job ", el("span", { class: "id" }, jobId));
  fill(main, heading, el("p", { "aria-busy": "true" }, "Loading the job…"));
  const state = { job: null, events: [], unacked: 0, serverTime: 0 };
  try {
    await refresh(jobId, state, panels, context.signal);
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
    live,
    el(
      "div",
      { class: "panels" },
      panels.map((p) => p.element),
    ),
  );
  live.textContent = liveText(state.job.status);
  // Not awaited: the page is shown; the poll runs until the job is final or the page is left.
  poll(jobId, state, panels, live, context);
}
