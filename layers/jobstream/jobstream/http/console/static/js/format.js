// Times are epoch milliseconds on the wire; people read local times and short durations.

import { el } from "./dom.js";

const pad = (n, width = 2) => String(n).padStart(width, "0");

export function localTime(ms) {
  const d = new Date(ms);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

export function duration(ms) {
  const value = Math.max(0, ms);
  if (value < 1000) {
    return `${Math.round(value)} ms`;
  }
  if (value < 60_000) {
    return `${(value / 1000).toFixed(value < 10_000 ? 1 : 0)} s`;
  }
  if (value < 3_600_000) {
    const minutes = Math.floor(value / 60_000);
    const seconds = Math.floor((value % 60_000) / 1000);
    return seconds ? `${minutes} min ${seconds} s` : `${minutes} min`;
  }
  if (value < 86_400_000) {
    const hours = Math.floor(value / 3_600_000);
    const minutes = Math.floor((value % 3_600_000) / 60_000);
    return minutes ? `${hours} h ${minutes} min` : `${hours} h`;
  }
  return `${Math.floor(value / 86_400_000)} d`;
}

export function age(ms, now) {
  return now - ms < 1000 ? "just now" : `${duration(now - ms)} ago`;
}

// A <time> element: local time as text, the exact instant (UTC) as its datetime and title.
export function timeOf(ms) {
  if (ms === null || ms === undefined) {
    return null;
  }
  const instant = new Date(ms).toISOString();
  return el("time", { datetime: instant, title: instant }, localTime(ms));
}

// A <time> element that reads as an age ("12 s ago"), the local time as its title.
export function ageOf(ms, now) {
  return el(
    "time",
    { datetime: new Date(ms).toISOString(), title: localTime(ms), class: "age" },
    age(ms, now),
  );
}
