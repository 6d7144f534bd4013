import { html, render } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { api, setToken, token, whenUnauthorized } from './api.ts';
import { Invocation } from './pages/invocation.ts';
import { Invocations } from './pages/invocations.ts';
import { Overview } from './pages/overview.ts';
import { Sql } from './pages/sql.ts';
import { useRoute } from './router.ts';
import { ErrorBox, messageOf } from './ui.ts';

/**
 * The console: served by the admin listener at /ui, talking to the admin API of the same origin. In managed mode it
 * asks for an access token first (kept in this tab's session only) and shows nothing before the API accepts it.
 */

function Login({ onDone }: { onDone: () => void }) {
  const [error, setError] = useState<string | undefined>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const value = new FormData(e.target as HTMLFormElement).get('token');
    setToken(typeof value === 'string' ? value.trim() : undefined);
    try {
      await api('GET', '/version');
      onDone();
    } catch (err) {
      setToken(undefined);
      setError(messageOf(err));
    }
  };
  return html`<main class="login">
    <h1>Ratchet console</h1>
    <form onSubmit=${submit} aria-label="Sign in">
      <label>Access token <input name="token" type="password" autocomplete="off" required /></label>
      <button type="submit">Sign in</button>
    </form>
    <p class="hint">
      A token with the role <code>full</code> or <code>admin</code> for this cluster. It is kept for this tab only.
    </p>
    ${error === undefined ? null : html`<${ErrorBox} message=${error} />`}
  </main>`;
}

function App() {
  const [auth, setAuth] = useState<'checking' | 'in' | 'login'>('checking');
  const route = useRoute();
  useEffect(() => {
    whenUnauthorized(() => setAuth('login'));
    api('GET', '/version').then(
      () => setAuth('in'),
      () => setAuth('login'),
    );
  }, []);
  if (auth === 'checking') return html`<p class="loading">Loading…</p>`;
  if (auth === 'login') return html`<${Login} onDone=${() => setAuth('in')} />`;
  return html`<div>
    <header>
      <nav aria-label="Main">
        <strong>Ratchet</strong>
        <a href="#/" aria-current=${route.page === 'overview' ? 'page' : undefined}>Overview</a>
        <a
          href="#/invocations"
          aria-current=${route.page === 'invocations' || route.page === 'invocation' ? 'page' : undefined}
          >Invocations</a
        >
        <a href="#/sql" aria-current=${route.page === 'sql' ? 'page' : undefined}>SQL</a>
        ${
          token() === undefined
            ? null
            : html`<button
                type="button"
                onClick=${() => {
                  setToken(undefined);
                  setAuth('login');
                }}
              >
                Sign out
              </button>`
        }
      </nav>
    </header>
    <main>
      ${route.page === 'overview' ? html`<${Overview} />` : null}
      ${route.page === 'invocations' ? html`<${Invocations} filters=${route.params} />` : null}
      ${route.page === 'invocation' && route.id !== undefined ? html`<${Invocation} id=${route.id} />` : null}
      ${route.page === 'sql' ? html`<${Sql} />` : null}
    </main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('app')!);
