// Sending dead callbacks again (POST /callbacks/redrive) from a button, after a confirmation:
// a job's from its deliveries, all of the tenant's from the dead letters page.
import { apiPost } from "../api.js";
import { confirmation } from "./confirm.js";

// `body` names what to send again ({} all, {job_id}); `after(revived)` updates the page.
export function redriveOnClick(button, outcome, { question, detail, confirmText, body, after }) {
  button.addEventListener("click", async () => {
    if (!(await confirmation(question, detail, confirmText, "Leave them"))) {
      button.focus();
      return;
    }
    button.disabled = true;
    try {
      let revived = 0;
      let answer;
      do {
        answer = await apiPost("/callbacks/redrive", { body });
        revived += answer.revived;
      } while (answer.more);
      outcome.textContent = `${revived} callback(s) sent again.`;
      await after(revived);
    } catch (error) {
      outcome.textContent = `Could not send them again: ${error.describe()}`;
    } finally {
      button.disabled = false;
    }
  });
}
