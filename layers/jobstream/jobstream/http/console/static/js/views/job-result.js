// The job page's outcome panels: a succeeded job's result (candidates or assets), a final
// job's error. Every value is shown as text; only http(s) URLs become links.
import { el, externalLink, facts, fill, json, scrolling, section, table } from "../dom.js";
import { timeOf } from "../format.js";

const dash = () => el("span", { class: "muted" }, "–");

function size(asset) {
  const parts = [];
  if (asset.width && asset.height) {
    parts.push(`${asset.width}×${asset.height}`);
  }
  if (asset.bytes !== undefined) {
    parts.push(`${asset.bytes.toLocaleString("en")} bytes`);
  }
  return parts.join(", ") || dash();
}

// A URL locator as a link named by its file (the whole URL in its title); others as text.
function locator(asset) {
  const found = asset.locator ?? {};
  if (found.kind !== "url") {
    return `${found.kind}: ${found.value}`;
  }
  let name = found.value;
  try {
    const last = new URL(found.value).pathname.split("/").filter(Boolean).at(-1);
    name = last ? decodeURIComponent(last) : found.value;
  } catch {
    // Not a URL (or not one that decodes) after all: its whole text names it.
  }
  const link = externalLink(found.value, name);
  link.setAttribute("title", found.value);
  return link;
}

function assetsTable(caption, rows) {
  return scrolling(
    caption,
    table(
      caption,
      [
        ["Asset", (row) => el("span", { class: "id" }, row.asset.asset_id)],
        ...(rows.some((row) => row.owner) ? [["Candidate", (row) => row.owner]] : []),
        ["Role", (row) => `${row.asset.role} ${row.asset.type}`],
        ["Size", (row) => size(row.asset)],
        ["MIME", (row) => row.asset.mime ?? dash()],
        ["Hash", (row) => (row.asset.hash ? el("span", { class: "id" }, row.asset.hash) : dash())],
        ["Locator", (row) => locator(row.asset)],
      ],
      rows,
    ),
  );
}

function candidatesView(result) {
  const candidates = result.candidates ?? [];
  const filtered = result.filtered ?? [];
  const assets = candidates.flatMap((c) =>
    (c.assets ?? []).map((asset) => ({ asset, owner: c.candidate_id })),
  );
  return [
    facts([
      ["Candidates", String(candidates.length)],
      ["Works scanned", result.scanned === undefined ? null : String(result.scanned)],
      ["Filtered out", String(filtered.length)],
    ]),
    candidates.length
      ? scrolling(
          "Candidates",
          table(
            "Candidates",
            [
              ["Candidate", (c) => el("span", { class: "id" }, c.candidate_id)],
              [
                "Work",
                (c) =>
                  c.url
                    ? externalLink(c.url, `${c.platform} ${c.work_id}`)
                    : `${c.platform} ${c.work_id}`,
              ],
              ["Type", (c) => c.work_type],
              ["Title", (c) => c.metadata?.title ?? dash()],
              ["Author", (c) => c.metadata?.author ?? dash()],
              ["Tags", (c) => (c.tags ?? []).map((t) => t.tag).join(", ") || dash()],
              ["Assets", (c) => String((c.assets ?? []).length)],
            ],
            candidates,
          ),
        )
      : null,
    assets.length ? assetsTable("Assets of the candidates", assets) : null,
    filtered.length
      ? el(
          "details",
          {},
          el("summary", {}, `Filtered works (${filtered.length})`),
          scrolling(
            "Filtered works",
            table(
              "Filtered works",
              [
                ["Work", (f) => f.work_id],
                ["Reason", (f) => f.reason],
              ],
              filtered,
            ),
          ),
        )
      : null,
  ];
}

function fetchedAssetsView(result) {
  return [
    facts([
      ["Assets", String(result.assets.length)],
      ["Work", result.work_id ?? null],
      ["Links expire", timeOf(result.expires_at)],
    ]),
    assetsTable(
      "Fetched assets",
      result.assets.map((asset) => ({ asset })),
    ),
  ];
}

function resultView(result) {
  if (Array.isArray(result.candidates)) {
    return candidatesView(result);
  }
  if (Array.isArray(result.assets)) {
    return fetchedAssetsView(result);
  }
  return [el("p", {}, "A result of a kind this console does not lay out: see it as JSON below.")];
}

export function resultPanel() {
  const body = el("div");
  const element = section("Result", body);
  element.hidden = true;
  return {
    element,
    update({ job }, { jobChanged }) {
      if (!jobChanged) {
        return;
      }
      element.hidden = !job.result;
      if (job.result) {
        fill(
          body,
          ...resultView(job.result),
          el("details", {}, el("summary", {}, "The result as JSON"), json(job.result)),
        );
      }
    },
  };
}

export function errorPanel() {
  const body = el("div");
  const element = section("Error", body);
  element.hidden = true;
  return {
    element,
    update({ job }, { jobChanged }) {
      if (!jobChanged) {
        return;
      }
      element.hidden = !job.error;
      if (job.error) {
        const error = job.error;
        fill(
          body,
          facts([
            ["Code", el("code", {}, error.code)],
            ["Message", error.message],
            ["Retryable", error.retryable ? "yes" : "no"],
          ]),
          error.detail ? el("details", {}, el("summary", {}, "Detail"), json(error.detail)) : null,
        );
      }
    },
  };
}
