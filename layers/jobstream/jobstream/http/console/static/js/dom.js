// Every value reaches the page as text: elements are built here, never parsed from HTML.
// Event handlers are attached with addEventListener (the CSP forbids inline ones), styles come
// from the stylesheet only, and a link goes to a route of the console or to an http(s) URL.

const FORBIDDEN_ATTRIBUTE = /^(on|style$|srcdoc$|formaction$)/i;

export function isSafeHref(value) {
  if (value.startsWith("#/")) {
    return true;
  }
  try {
    const url = new URL(value);
    return url.protocol === "https:" || url.protocol === "http:";
  } catch {
    return false;
  }
}

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    if (FORBIDDEN_ATTRIBUTE.test(name)) {
      throw new Error(`attribute ${name} is not set by the console`);
    }
    if (name === "href" && !isSafeHref(String(value))) {
      throw new Error("a link must be a console route or an http(s) URL");
    }
    node.setAttribute(name, value === true ? "" : String(value));
  }
  return append(node, children);
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replaces a node's children (text for every value that is not a node; null is left out).
export function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

// A link to an external http(s) URL, or the URL as plain text when it is anything else.
export function externalLink(url, text = url) {
  if (typeof url === "string" && isSafeHref(url) && !url.startsWith("#")) {
    return el("a", { href: url, rel: "noopener noreferrer" }, text);
  }
  return el("span", {}, text ?? "");
}

// A definition list from [term, value] pairs; pairs whose value is null are left out.
export function facts(pairs, className = "facts") {
  return el(
    "dl",
    { class: className },
    pairs
      .filter(([, value]) => value !== null && value !== undefined && value !== "")
      .map(([term, value]) =>
        el("div", { class: "fact" }, el("dt", {}, term), el("dd", {}, value)),
      ),
  );
}

// A table with a header row and one row per item. Each column is [header, cell(item)].
export function table(caption, columns, items, className = "") {
  return el(
    "table",
    { class: `grid ${className}`.trim() },
    el("caption", {}, caption),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        columns.map(([header]) => el("th", { scope: "col" }, header)),
      ),
    ),
    el(
      "tbody",
      {},
      items.map((item) =>
        el(
          "tr",
          {},
          columns.map(([header, cell]) => el("td", { "data-label": header }, cell(item))),
        ),
      ),
    ),
  );
}

// A wide table in a region of its own that scrolls sideways (and is reachable by keyboard).
export function scrolling(label, content) {
  return el(
    "div",
    { class: "scroll", role: "region", "aria-label": label, tabindex: "0" },
    content,
  );
}

export function json(value) {
  return el("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

export function section(title, ...children) {
  const id = `section-${title.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
  return el(
    "section",
    { class: "panel", "aria-labelledby": id },
    el("h2", { id }, title),
    ...children,
  );
}
