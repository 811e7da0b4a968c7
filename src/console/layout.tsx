import type { Child } from 'hono/jsx';
import type { Context } from 'hono';
import { assetUrl, MODULE_SCRIPTS, PAGE_SCRIPTS, PAGE_STYLES, PRELOADED_MODULES, type PageKind } from './assets.ts';
import { contentSecurityPolicy, CSRF_FIELD, SECURITY_HEADERS } from './security.ts';
import type { ConsoleSession } from '../domain/sessions.ts';
import type { ClientError } from './api.ts';
import { Problem } from './problem.tsx';

/** htmx without eval, inline styles or scripts in swapped content: what the Content-Security-Policy allows. */
const HTMX_CONFIG = JSON.stringify({
  includeIndicatorStyles: false,
  allowEval: false,
  allowScriptTags: false,
  selfRequestsOnly: true,
  historyCacheSize: 0,
});

export type Section = 'vms' | 'snapshots' | 'templates' | 'images' | 'events' | 'webhooks' | 'billing' | 'keys' | null;

const NAV: { id: Exclude<Section, null>; href: string; label: string }[] = [
  { id: 'vms', href: '/console/vms', label: 'VMs' },
  { id: 'snapshots', href: '/console/snapshots', label: 'Snapshots' },
  { id: 'templates', href: '/console/templates', label: 'Templates' },
  { id: 'images', href: '/console/images', label: 'Images' },
  { id: 'events', href: '/console/events', label: 'Events' },
  { id: 'webhooks', href: '/console/webhooks', label: 'Webhooks' },
  { id: 'billing', href: '/console/billing', label: 'Billing' },
  { id: 'keys', href: '/console/keys', label: 'API keys' },
];

export interface PageOptions {
  title: string;
  section?: Section;
  session?: ConsoleSession;
  problem?: ClientError | null;
  notice?: string | null;
  kind?: PageKind;
  /** Breadcrumb above the title. */
  crumbs?: { href: string; label: string }[];
  /** Buttons or links beside the title. */
  actions?: Child;
  status?: number;
  /** A page of one small form (sign-in): centred. */
  centered?: boolean;
  /** This response's CSP nonce for `<style>` elements that the page's script makes (the terminal's). */
  styleNonce?: string;
  /** A class on <main> (a page laid out its own way). */
  mainClass?: string;
}

/** The hidden field every form that changes something carries. */
export const Csrf = ({ session }: { session: ConsoleSession }) => <input type="hidden" name={CSRF_FIELD} value={session.csrfToken} />;

function Shell(props: PageOptions & { children: Child }) {
  const scripts = PAGE_SCRIPTS[props.kind ?? 'base'];
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · agentvm`}</title>
        <meta name="htmx-config" content={HTMX_CONFIG} />
        <link rel="stylesheet" href={assetUrl('console.css')} />
        {(PAGE_STYLES[props.kind ?? 'base'] ?? []).map((s) => (
          <link rel="stylesheet" href={assetUrl(s)} />
        ))}
        {scripts.map((s) =>
          PRELOADED_MODULES.has(s) ? (
            <link rel="modulepreload" href={assetUrl(s)} />
          ) : MODULE_SCRIPTS.has(s) ? (
            <script src={assetUrl(s)} type="module"></script>
          ) : (
            <script src={assetUrl(s)} defer></script>
          ),
        )}
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="topbar">
          <a class="brand" href={props.session ? '/console/vms' : '/console/login'} aria-label="agentvm console home">
            <span class="brand-mark" aria-hidden="true">▣</span> agentvm
          </a>
          {props.session ? (
            <>
              <nav class="nav" aria-label="Console">
                {NAV.map((n) => (
                  <a href={n.href} aria-current={props.section === n.id ? 'page' : undefined}>
                    {n.label}
                  </a>
                ))}
              </nav>
              <form class="account" method="post" action="/console/logout">
                <Csrf session={props.session} />
                <span class="account-email" title="Signed in as">
                  {props.session.principal.email}
                </span>
                <button type="submit" class="button ghost small">
                  Sign out
                </button>
              </form>
            </>
          ) : null}
        </header>
        <main id="main" tabindex={-1} class={[props.centered ? 'centered' : '', props.mainClass ?? ''].join(' ').trim() || undefined}>
          {props.crumbs?.length ? (
            <nav class="crumbs" aria-label="Breadcrumb">
              {props.crumbs.map((c) => (
                <>
                  <a href={c.href}>{c.label}</a>
                  <span aria-hidden="true"> / </span>
                </>
              ))}
            </nav>
          ) : null}
          <div class="page-head">
            <h1>{props.title}</h1>
            {props.actions ? <div class="page-actions">{props.actions}</div> : null}
          </div>
          {props.problem ? <Problem problem={props.problem} /> : null}
          {props.notice ? (
            <p class="notice" role="status">
              {props.notice}
            </p>
          ) : null}
          {props.children}
        </main>
      </body>
    </html>
  );
}

/** Sends a whole page: never cached (it holds the tenant's data), with the console's security headers. */
export async function page(c: Context, opts: PageOptions, body: Child): Promise<Response> {
  const html = '<!doctype html>' + (await (<Shell {...opts}>{body}</Shell>).toString());
  const headers: Record<string, string> = { ...SECURITY_HEADERS, 'Cache-Control': 'no-store' };
  if (opts.styleNonce) headers['Content-Security-Policy'] = contentSecurityPolicy({ styleNonce: opts.styleNonce });
  return c.html(html, (opts.status ?? 200) as 200, headers);
}

/** Sends a piece of a page (an htmx swap). */
export async function fragment(c: Context, body: Child, status = 200): Promise<Response> {
  const html = await (<>{body}</>).toString();
  return c.html(html, status as 200, { ...SECURITY_HEADERS, 'Cache-Control': 'no-store' });
}
