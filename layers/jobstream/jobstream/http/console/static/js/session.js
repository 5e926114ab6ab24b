// The tenant token: in this tab's session storage only, never in a URL or a cookie.
const KEY = "jobstream.console.token";

export function getToken() {
  return window.sessionStorage.getItem(KEY);
}

export function setToken(token) {
  window.sessionStorage.setItem(KEY, token);
}

export function clearToken() {
  window.sessionStorage.removeItem(KEY);
}
