// The console's pages live in the URL's fragment (#/jobs, #/jobs/<job_id>, #/dead-letters,
// #/capabilities), so the server serves one page and every link can be bookmarked; a token
// never goes in it.

export const JOB_FILTERS = ["status", "correlation_id", "idempotency_key", "limit", "cursor"];

export function jobHref(jobId) {
  return `#/jobs/${encodeURIComponent(jobId)}`;
}

export function jobsHref(filters = {}) {
  const query = new URLSearchParams();
  for (const name of JOB_FILTERS) {
    if (filters[name]) {
      query.set(name, filters[name]);
    }
  }
  const text = query.toString();
  return text ? `#/jobs?${text}` : "#/jobs";
}

export function parseRoute(hash) {
  const fragment = hash.replace(/^#/, "");
  const mark = fragment.indexOf("?");
  const path = mark < 0 ? fragment : fragment.slice(0, mark);
  const params = new URLSearchParams(mark < 0 ? "" : fragment.slice(mark + 1));
  const parts = path.split("/").filter(Boolean);
  if (parts.length === 0 || (parts.length === 1 && parts[0] === "jobs")) {
    return { view: "jobs", params };
  }
  if (parts.length === 2 && parts[0] === "jobs") {
    try {
      return { view: "job", jobId: decodeURIComponent(parts[1]), params };
    } catch {
      return { view: "unknown", path };
    }
  }
  if (parts.length === 1 && parts[0] === "capabilities") {
    return { view: "capabilities", params };
  }
  if (parts.length === 1 && parts[0] === "dead-letters") {
    return { view: "dead-letters", params };
  }
  return { view: "unknown", path };
}
