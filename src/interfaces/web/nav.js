// @ts-check
// In-page navigation: the shell (app.js) installs the router.

/** @type {() => void} */
let router = () => {};

/** @param {() => void} fn */
export function setRouter(fn) {
  router = fn;
}

export function route() {
  router();
}

/** @param {string} path */
export function navigate(path) {
  history.pushState(null, '', path);
  router();
}

/** A link's click handler: navigates in the page unless a modifier asks for a new tab or window. @param {MouseEvent} event */
export function link(event) {
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  const target = /** @type {HTMLElement} */ (event.currentTarget);
  navigate(target.getAttribute('href') ?? '/');
}
