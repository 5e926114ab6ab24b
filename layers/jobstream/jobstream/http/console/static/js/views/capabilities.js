// What this deployment offers the token's tenant: protocol versions, job types, budgets, limits.
import { apiGet } from "../api.js";
import { el, facts, fill, json, scrolling, section, table } from "../dom.js";
import { duration, timeOf } from "../format.js";

const ms = (value) => (value === undefined ? "–" : duration(value));

export async function renderCapabilities(main, _route, { signal }) {
  fill(
    main,
    el("h1", { tabindex: "-1" }, "Capabilities"),
    el("p", { "aria-busy": "true" }, "Loading…"),
  );
  const capabilities = await apiGet("/capabilities", {}, { signal });
  const types = capabilities.job_types ?? [];
  const limits = capabilities.limits?.job_types ?? {};
  fill(
    main,
    el("h1", { tabindex: "-1" }, "Capabilities"),
    section(
      "Deployment",
      facts([
        ["Protocol versions", (capabilities.protocol_versions ?? []).join(", ")],
        ["Server time", timeOf(capabilities.server_time)],
      ]),
    ),
    section(
      "Job types",
      scrolling(
        "Job types",
        table(
          "Job types and their budgets",
          [
            ["Job type", (t) => el("code", {}, t.name)],
            ["Features", (t) => (t.features ?? []).join(", ")],
            ["Queued at most", (t) => ms(t.queued_timeout_ms)],
            ["Silent at most", (t) => ms(t.stall_timeout_ms)],
            ["Heartbeat every", (t) => ms(t.heartbeat_interval_ms)],
            ["Default deadline", (t) => ms(t.default_deadline_ms)],
          ],
          types,
        ),
      ),
    ),
    section(
      "Limits",
      types.map((t) =>
        el(
          "div",
          { class: "limits" },
          el("h3", {}, t.name),
          facts(
            Object.entries(limits[t.name] ?? {}).map(([name, value]) => [
              name,
              typeof value === "object" ? JSON.stringify(value) : String(value),
            ]),
          ),
        ),
      ),
    ),
    el("details", {}, el("summary", {}, "The capabilities document as JSON"), json(capabilities)),
  );
}
