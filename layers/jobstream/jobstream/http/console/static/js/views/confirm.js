// A modal question before an action that changes something (cancel, redrive).
import { el } from "../dom.js";

// A modal question: resolves true when the person confirms, false on "keep" or Escape.
export function confirmation(question, detail, confirmText, keepText) {
  const confirm = el("button", { type: "button", class: "danger" }, confirmText);
  const keep = el("button", { type: "button", class: "secondary" }, keepText);
  const dialog = el(
    "dialog",
    {
      class: "confirm",
      "aria-labelledby": "confirm-question",
      "aria-describedby": "confirm-detail",
    },
    el("h2", { id: "confirm-question" }, question),
    el("p", { id: "confirm-detail" }, detail),
    el("div", { class: "inline" }, keep, confirm),
  );
  document.body.append(dialog);
  return new Promise((resolve) => {
    confirm.addEventListener("click", () => dialog.close("confirm"));
    keep.addEventListener("click", () => dialog.close("keep"));
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "confirm");
    });
    dialog.showModal();
    keep.focus();
  });
}
