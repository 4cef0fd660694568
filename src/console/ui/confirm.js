import { useState } from 'preact/hooks';
import { html } from './html.js';

/**
 * A button that asks before it acts: the first click shows `question` with a confirm and a
 * cancel button, so a stray click changes nothing. With `typed`, the confirm button is enabled
 * only once that text is typed (deleting an endpoint: its id).
 */
export function ConfirmButton({ label, confirmLabel, question, onConfirm, typed, disabled, secondary, ariaLabel }) {
  const [asking, setAsking] = useState(false);
  const [text, setText] = useState('');
  if (!asking) {
    return html`<button type="button" class=${secondary ? 'secondary' : 'danger'} disabled=${disabled} aria-label=${ariaLabel} onClick=${() => (setAsking(true), setText(''))}>${label}</button>`;
  }
  const ready = typed === undefined || text === typed;
  const confirm = () => {
    setAsking(false);
    onConfirm();
  };
  return html`<span class="confirm" role="group" aria-label=${ariaLabel || label}><span>${question}</span>
    ${typed !== undefined ? html`<label class="inline">Type <code>${typed}</code> <input value=${text} onInput=${(e) => setText(e.currentTarget.value)} aria-label=${`Type ${typed} to confirm`} autocomplete="off" /></label>` : ''}
    <button type="button" class="danger" disabled=${!ready} onClick=${confirm}>${confirmLabel}</button>
    <button type="button" class="secondary" onClick=${() => setAsking(false)}>Keep it</button></span>`;
}
