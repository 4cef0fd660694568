import type { ServerResponse } from 'node:http';

/**
 * The Content-Security-Policy of every console response: scripts and styles only from the
 * gateway's own files (no inline script), images also as data:/blob: and from https object
 * stores (the image endpoints' S3 links), no framing, no plugins, no form posts elsewhere.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob: https:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Sets the security headers every console response carries (docs/console.md). */
export function setSecurityHeaders(res: ServerResponse): void {
  res.setHeader('content-security-policy', CONSOLE_CSP);
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('x-frame-options', 'DENY');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader('cross-origin-opener-policy', 'same-origin');
}
