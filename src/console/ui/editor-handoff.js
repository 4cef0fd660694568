/* global location */
import { seg } from './api.js';

/** A body handed from a job's page to the test editor (in memory only; taken once). */
let pending = null;

/** Opens the test editor on `endpointId` with `body` in it ("Open in test editor" on a job's page). */
export function openInEditor(endpointId, body) {
  pending = { endpointId, body };
  location.hash = `#/editor/${seg(endpointId)}`;
}

/** The body handed over for this endpoint, once; null when none was. */
export function takeHandoff(endpointId) {
  if (!pending || pending.endpointId !== endpointId) return null;
  const { body } = pending;
  pending = null;
  return body;
}
