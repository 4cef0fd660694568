// Calls of the console API (/console/api): the session cookie goes along by itself (HttpOnly,
// never readable here); every state-changing call carries the CSRF token in X-CSRF-Token.
let csrfToken = null;
let onSignedOut = () => {};

/** Remembers the token the session route answered; `signedOut` is called on any 401. */
export function setSession(token, signedOut) {
  csrfToken = token;
  if (signedOut) onSignedOut = signedOut;
}

/** An error of the API, with its HTTP status and JSON body. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.error ? body.error : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** Calls `/console/api/<path>`; resolves with the JSON answer, rejects with an ApiError. */
export async function api(path, options = {}) {
  const method = options.method || 'GET';
  const headers = { accept: 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  const res = await fetch(`/console/api/${path}`, {
    method,
    headers,
    credentials: 'same-origin',
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: options.signal,
  });
  const text = await res.text();
  let body = null;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = { error: text };
  }
  if (res.status === 401 && path !== 'session') onSignedOut();
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

/** `encodeURIComponent` for one path segment. */
export const seg = (s) => encodeURIComponent(s);
