// The jobstream API, called with this tab's token: the console sees what the token may see.
import { clearToken, getToken } from "./session.js";

// The console is served at <API>/console/, so the API is one level up (a stage's prefix kept).
const API_ROOT = new URL("../", document.baseURI);

export class ApiError extends Error {
  constructor(status, code, message, retryable, detail) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryable = retryable;
    this.detail = detail;
  }

  // What a person is told: the envelope's message, its code and the HTTP status.
  describe() {
    return this.status ? `${this.message} (HTTP ${this.status}, ${this.code})` : this.message;
  }
}

export function apiUrl(path, query = {}) {
  const url = new URL(path.replace(/^\//, ""), API_ROOT);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") {
      url.searchParams.set(name, String(value));
    }
  }
  return url;
}

// GET a JSON document. A 401 with the stored token signs the tab out ("console:signed-out");
// `token` checks another token without storing it (sign-in).
export function apiGet(path, query = {}, { signal, token } = {}) {
  return call("GET", apiUrl(path, query), { signal, token });
}

// POST to one of the API's action routes (cancel, redrive): a JSON body when given, the
// answer's document back.
export function apiPost(path, { signal, body } = {}) {
  return call("POST", apiUrl(path), { signal, body });
}

async function call(method, url, { signal, token, body }) {
  const bearer = token ?? getToken() ?? "";
  const headers = { Authorization: `Bearer ${bearer}`, Accept: "application/json" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") {
      throw error;
    }
    throw new ApiError(0, "network_error", "The API could not be reached.", true, {});
  }
  const answer = await response.json().catch(() => null);
  if (response.ok) {
    return answer;
  }
  const envelope = answer?.error ?? {};
  const error = new ApiError(
    response.status,
    envelope.code ?? `http_${response.status}`,
    envelope.message ?? (response.statusText || "request failed"),
    Boolean(envelope.retryable),
    envelope.detail ?? {},
  );
  if (response.status === 401 && token === undefined) {
    clearToken();
    window.dispatchEvent(new CustomEvent("console:signed-out", { detail: error }));
  }
  throw error;
}

export function jobPath(jobId, suffix = "") {
  return `/jobs/${encodeURIComponent(jobId)}${suffix}`;
}

// Every event of a job after `after` (all of them without it), page by page.
export async function eventsAfter(jobId, after, { signal } = {}) {
  const events = [];
  let cursor = after;
  let page;
  // Bounded: a job has a few dozen events; a page holds up to 200.
  for (let pages = 0; pages < 50; pages += 1) {
    page = await apiGet(jobPath(jobId, "/events"), { after: cursor }, { signal });
    events.push(...page.events);
    if (!page.next_after) {
      break;
    }
    cursor = page.next_after;
  }
  return { events, unacked: page.unacked, serverTime: page.server_time };
}
