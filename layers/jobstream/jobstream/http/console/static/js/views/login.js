// Sign in: a tenant's API token, checked against the API before it is kept for this tab.
import { apiGet } from "../api.js";
import { el, fill } from "../dom.js";
import { setToken } from "../session.js";

export function renderLogin(main, { message, onSignedIn }) {
  const input = el("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    "aria-describedby": "token-help",
  });
  const button = el("button", { type: "submit" }, "Sign in");
  const alert = el("p", { class: "alert", role: "alert", id: "sign-in-error" });
  const form = el(
    "form",
    { class: "panel sign-in", "aria-labelledby": "sign-in-title" },
    el("h1", { id: "sign-in-title", tabindex: "-1" }, "Sign in"),
    el(
      "p",
      { id: "token-help", class: "hint" },
      "A tenant's API token. The console calls the jobstream API with it and shows exactly " +
        "what that token may see. It is kept in this browser tab only (session storage) and " +
        "sent only in the Authorization header.",
    ),
    el("label", { for: "token" }, "Token"),
    el("div", { class: "inline" }, input, button),
    alert,
  );
  const refuse = (text) => {
    alert.textContent = text;
    input.setAttribute("aria-invalid", "true");
    input.focus();
    input.select();
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) {
      refuse("Enter a token.");
      return;
    }
    button.disabled = true;
    alert.textContent = "";
    try {
      await apiGet("/capabilities", {}, { token });
    } catch (error) {
      button.disabled = false;
      const prefix = error.status === 401 ? "This token was refused" : "Could not sign in";
      refuse(`${prefix}: ${error.describe()}`);
      return;
    }
    setToken(token);
    onSignedIn();
  });
  fill(main, form);
  if (message) {
    alert.textContent = message;
  }
  input.focus();
}
