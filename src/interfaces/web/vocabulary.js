// @ts-check
// The server's vocabularies, injected into the page (index.html's meta tags) from the same
// lists the API uses: message types, failure categories, session states.

/** @param {string} name */
const meta = (name) =>
  (document.querySelector(`meta[name="${name}"]`)?.getAttribute('content') ?? '').split(/\s+/).filter(Boolean);

/** Every CliMessage type (src/protocol/messages.ts). */
export const MESSAGE_TYPES = meta('sessiond-message-types');
/** Every failure category. */
export const CATEGORIES = meta('sessiond-failure-categories');
/** Every session state: `queued` and the machine's states (machines/states.ts), in the machine's order. */
export const SESSION_STATES = meta('sessiond-session-states');
/** The states a turn settles in. */
export const SETTLED = new Set(meta('sessiond-settled-states'));
