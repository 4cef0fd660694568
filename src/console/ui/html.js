import { h } from 'preact';
import htm from 'htm';

/** Tagged templates for Preact: no JSX, no compile step beyond the bundle. */
export const html = htm.bind(h);
