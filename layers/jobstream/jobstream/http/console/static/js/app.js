// The console's entry point: sign-in, the header, and the router that shows one view at a time.
import { el, fill } from "./dom.js";
import { parseRoute } from "./routes.js";
import { clearToken, getToken } from "./session.js";
import { renderCapabilities } from "./views/capabilities.js";
import { renderDeadLetters } from "./views/dead-letters.js";
import { renderJob } from "./views/job.js";
import { renderJobs } from "./views/jobs.js";
import { renderLogin } from "./views/login.js";

// Each view: render(main, route, { signal, announce }); the signal aborts when it is left.
const VIEWS = {
  jobs: { title: "Jobs", render: renderJobs },
  job: { title: "Job", render: renderJob },
  "dead-letters": { title: "Dead letters", render: renderDeadLetters },
  capabilities: { title: "Capabilities", render: renderCapabilities },
  unknown: { title: "Not found", render: renderUnknown },
};

let leaving = null;
let signInMessage = "";

function renderUnknown(main) {
  fill(
    main,
    el("h1", { tabindex: "-1" }, "No such page"),
    el(
      "p",
      {},
      "The console has no page at this address. ",
      el("a", { href: "#/jobs" }, "See the jobs."),
    ),
  );
}

function announce(text) {
  const region = document.getElementById("announce");
  region.textContent = "";
  window.setTimeout(() => {
    region.textContent = text;
  }, 50);
}

function updateHeader(route, signedIn) {
  document.querySelector(".top-nav").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !signedIn;
  for (const link of document.querySelectorAll("[data-nav]")) {
    const current =
      signedIn && route && link.dataset.nav === (route.view === "job" ? "jobs" : route.view);
    if (current) {
      link.setAttribute("aria-current", "page");
    } else {
      link.removeAttribute("aria-current");
    }
  }
}

function focusHeading(main) {
  const heading = main.querySelector("h1");
  (heading ?? main).focus({ preventScroll: false });
}

async function show({ moveFocus = true } = {}) {
  leaving?.abort();
  const controller = new AbortController();
  leaving = controller;
  const main = document.getElementById("main");
  if (!getToken()) {
    updateHeader(null, false);
    document.title = "Sign in · jobstream console";
    renderLogin(main, { message: signInMessage, onSignedIn: () => show() });
    signInMessage = "";
    main.setAttribute("aria-busy", "false");
    main.dataset.shown = "sign-in";
    return;
  }
  const route = parseRoute(window.location.hash);
  const view = VIEWS[route.view];
  updateHeader(route, true);
  document.title = `${view.title} · jobstream console`;
  // Which address the page shows, once it shows it (assistive technology and tests wait on it).
  main.setAttribute("aria-busy", "true");
  main.dataset.shown = "";
  try {
    await view.render(main, route, { signal: controller.signal, announce });
  } catch (error) {
    if (error.name === "AbortError" || controller.signal.aborted) {
      return;
    }
    if (error.status === 401) {
      return; // signed out: "console:signed-out" shows the sign-in form
    }
    fill(
      main,
      el("h1", { tabindex: "-1" }, view.title),
      el(
        "p",
        { class: "alert", role: "alert" },
        `Could not load this page: ${error.describe ? error.describe() : error.message}`,
      ),
    );
  }
  if (controller.signal.aborted) {
    return;
  }
  main.setAttribute("aria-busy", "false");
  main.dataset.shown = window.location.hash || "#/jobs";
  if (moveFocus) {
    focusHeading(main);
  }
}

window.addEventListener("hashchange", () => show());
window.addEventListener("console:signed-out", (event) => {
  signInMessage = `Signed out: the API refused the token (${event.detail.describe()}). Sign in again.`;
  show();
});
document.getElementById("sign-out").addEventListener("click", () => {
  clearToken();
  signInMessage = "Signed out.";
  show();
});
show({ moveFocus: false });
