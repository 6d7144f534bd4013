import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ERROR_CODES } from '../errors/codes.ts';

/**
 * The web console (`console/`, built into `dist/console/` by `npm run build`), served by the admin listener at `/ui`,
 * and the error code pages it links to at `/ui/errors/<code>`. The files hold no data: they load without a token; the
 * console then calls the admin API with the user's token like any client. Nothing is fetched from elsewhere (the CSP
 * says so).
 */

/** Where the built console is: beside the bundle (dist/runtime → dist/console), or in the checkout (sources). */
function consoleDir(): string | undefined {
  const candidates = [new URL('../console/', import.meta.url), new URL('../../../dist/console/', import.meta.url)];
  for (const c of candidates) {
    const dir = fileURLToPath(c);
    if (existsSync(join(dir, 'index.html'))) return dir;
  }
  return undefined;
}

function errorDocsDir(): string | undefined {
  const candidates = [new URL('./error-docs/', import.meta.url), new URL('../errors/docs/', import.meta.url)];
  for (const c of candidates) {
    const dir = fileURLToPath(c);
    if (existsSync(dir)) return dir;
  }
  return undefined;
}

const FILES: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.js.map': 'application/json',
  'app.css': 'text/css; charset=utf-8',
};

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** Paths the admin API serves without a token (static files of the console). */
export function isConsoleAsset(method: string, path: string): boolean {
  return (method === 'GET' || method === 'HEAD') && (path === '/ui' || path.startsWith('/ui/'));
}

export function consoleRoutes(app: FastifyInstance): void {
  const dir = consoleDir();
  const docs = errorDocsDir();
  const serve = async (name: string, reply: FastifyReply): Promise<unknown> => {
    if (dir === undefined) {
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('The console is not built in this installation: run `npm run build` (it writes dist/console).');
    }
    const type = FILES[name];
    if (type === undefined) return reply.code(404).send();
    const body = await readFile(join(dir, name));
    return reply
      .type(type)
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', name === 'index.html' ? 'no-cache' : 'max-age=300')
      .send(body);
  };
  app.get('/ui', async (_req, reply) => reply.redirect('/ui/'));
  app.get('/ui/', async (_req, reply) => serve('index.html', reply));
  app.get<{ Params: { file: string } }>('/ui/:file', async (req, reply) => serve(req.params.file, reply));
  app.get<{ Params: { code: string } }>('/ui/errors/:code', async (req, reply) => {
    const code = req.params.code;
    if (!(code in ERROR_CODES) || docs === undefined) return reply.code(404).send();
    const page = await readFile(join(docs, `${code}.md`), 'utf8').catch(() => undefined);
    if (page === undefined) return reply.code(404).send();
    return reply.type('text/plain; charset=utf-8').header('x-content-type-options', 'nosniff').send(page);
  });
}
