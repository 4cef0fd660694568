/* global document, window, location */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, setSession } from './api.js';
import { AuditPage } from './audit.js';
import { ChartsPage } from './charts.js';
import { ErrorBox } from './common.js';
import { EditorPage } from './editor.js';
import { EndpointPage } from './endpoint.js';
import { EndpointsPage } from './endpoints.js';
import { JobPage, JobsPage } from './jobs.js';
import { KeysPage } from './keys.js';
import { html } from './html.js';
import { OverviewPage } from './overview.js';
import { UsagePage } from './usage.js';
import { WorkersPage } from './workers.js';

const NAV = [
  ['overview', 'Overview'],
  ['endpoints', 'Endpoints'],
  ['charts', 'Charts'],
  ['jobs', 'Jobs'],
  ['editor', 'Test editor'],
  ['workers', 'Workers'],
  ['keys', 'API keys'],
  ['usage', 'Usage'],
  ['audit', 'Audit log'],
];

/** The page for a hash route (`#/jobs/echo`, `#/job/echo/ID`, …). */
function page(route) {
  const [name, a, b] = route.map((s) => decodeURIComponent(s));
  switch (name) {
    case 'charts':
      return html`<${ChartsPage} endpointId=${a} />`;
    case 'jobs':
      return html`<${JobsPage} endpointId=${a} />`;
    case 'job':
      // Keyed by the job: another job's page starts afresh (the previous job's state is not kept, nor shown under the new id).
      return html`<${JobPage} key=${`${a}/${b}`} endpointId=${a} jobId=${b} />`;
    case 'overview':
      return html`<${OverviewPage} />`;
    case 'endpoint':
      return html`<${EndpointPage} key=${a} endpointId=${a} />`;
    case 'editor':
      return html`<${EditorPage} key=${a || ''} endpointId=${a} />`;
    case 'workers':
      return html`<${WorkersPage} endpointId=${a} />`;
    case 'keys':
      return html`<${KeysPage} />`;
    case 'usage':
      return html`<${UsagePage} />`;
    case 'audit':
      return html`<${AuditPage} />`;
    default:
      return html`<${EndpointsPage} />`;
  }
}

const routeOf = () => location.hash.replace(/^#\/?/, '').split('/').filter(Boolean);

/**
 * Sign-in with an admin key, or with the console password where the gateway has one
 * (GANTRY_CONSOLE_PASSWORD): what is typed goes to the server once and is not kept in the page.
 */
function SignIn({ onSignedIn, passwordSignIn }) {
  const [error, setError] = useState(null);
  const [withPassword, setWithPassword] = useState(passwordSignIn);
  const field = withPassword ? 'password' : 'key';
  const submit = async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    try {
      const r = await api('session', { method: 'POST', body: { [field]: form.secret.value } });
      form.reset();
      onSignedIn(r.csrfToken);
    } catch (err) {
      setError(err);
    }
  };
  const choose = (password) => (setWithPassword(password), setError(null));
  return html`<main class="signin"><form class="card" onSubmit=${submit} aria-labelledby="h-signin">
    <h1 id="h-signin">Gantry console</h1>
    ${passwordSignIn ? html`<fieldset class="choice"><legend>Sign in with</legend>
      <label class="inline"><input type="radio" name="method" checked=${withPassword} onChange=${() => choose(true)} /> Password</label>
      <label class="inline"><input type="radio" name="method" checked=${!withPassword} onChange=${() => choose(false)} /> API key</label></fieldset>` : ''}
    <label for="signin-secret">${withPassword ? 'Console password' : 'Admin API key'}</label>
    <input id="signin-secret" key=${field} name="secret" type="password" autocomplete="current-password" required autofocus />
    <${ErrorBox} error=${error} />
    <button type="submit">Sign in</button></form></main>`;
}

/** The console: sign-in, then the navigation and the page of the current hash route. */
function App() {
  const [signedIn, setSignedIn] = useState(null);
  const [passwordSignIn, setPasswordSignIn] = useState(false);
  const [route, setRoute] = useState(routeOf());
  const signedOut = () => (setSession(null), setSignedIn(false));
  const signedInWith = (token) => (setSession(token, signedOut), setSignedIn(true));
  useEffect(() => {
    api('session').then(
      (r) => signedInWith(r.csrfToken),
      (err) => (setPasswordSignIn(Boolean(err.body && err.body.passwordSignIn)), signedOut()),
    );
    const onHash = () => setRoute(routeOf());
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  if (signedIn === null) return html`<p class="loading">Loading…</p>`;
  if (!signedIn) return html`<${SignIn} onSignedIn=${signedInWith} passwordSignIn=${passwordSignIn} />`;
  const signOut = () => api('session', { method: 'DELETE' }).finally(signedOut);
  const current = route[0] || 'endpoints';
  return html`<a class="skip" href="#main">Skip to content</a>
    <header><span class="brand">Gantry</span>
      <nav aria-label="Console">${NAV.map(([id, label]) => html`<a href=${`#/${id}`} aria-current=${current === id || (id === 'jobs' && current === 'job') || (id === 'endpoints' && current === 'endpoint') ? 'page' : undefined}>${label}</a>`)}</nav>
      <button class="secondary" onClick=${signOut}>Sign out</button></header>
    <main id="main" tabindex="-1">${page(route)}</main>`;
}

render(html`<${App} />`, document.getElementById('app'));
