import { useEffect, useState } from 'preact/hooks';

/** Hash routes: `#/`, `#/invocations?status=…`, `#/invocation/<id>`, `#/sql`. */
export interface Route {
  readonly page: 'overview' | 'invocations' | 'invocation' | 'sql';
  readonly id?: string;
  readonly params: Record<string, string>;
}

export function parseRoute(hash: string): Route {
  const [path = '', search = ''] = hash.replace(/^#/, '').split('?');
  const params = Object.fromEntries(new URLSearchParams(search));
  const parts = path.split('/').filter((p) => p !== '');
  if (parts[0] === 'invocations') return { page: 'invocations', params };
  if (parts[0] === 'sql') return { page: 'sql', params };
  if (parts[0] === 'invocation' && parts[1] !== undefined) {
    return { page: 'invocation', id: decodeURIComponent(parts[1]), params };
  }
  return { page: 'overview', params };
}

export function navigate(href: string): void {
  location.hash = href.replace(/^#/, '');
}

export function useRoute(): Route {
  const [route, setRoute] = useState(parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}
