import { call } from '../api.ts';
import type { ConsoleApp, ConsoleDeps } from '../app.tsx';
import { count, money } from '../format.ts';
import { page } from '../layout.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';
import { PLAN_IDS, TIER_IDS } from '../../domain/plans.ts';

const SPEND_DAYS = 30;

export function registerBilling(app: ConsoleApp, deps: ConsoleDeps) {
  app.get('/billing', async (c) => {
    const api = c.get('api');
    const session = c.get('session') as ConsoleSession;
    // Spend per day is the console's own view of the ledger, read under the session's tenant like every API read.
    const [billing, usage, spend] = await Promise.all([
      call(api.GET('/v1/api/billing')),
      call(api.GET('/v1/api/usage')),
      deps.services.usage.dailySpend(session.principal.tenantId, SPEND_DAYS),
    ]);
    const total = spend.reduce((s, d) => s + d.card_cents + d.credits_cents, 0);
    const spentDays = spend.filter((d) => d.card_cents + d.credits_cents > 0);
    return page(
      c,
      { title: 'Billing and usage', section: 'billing', session, kind: 'billing', actions: <a class="button" href="/console/billing/ledger">Ledger</a> },
      <>
        <div class="stats">
          <div class="stat card">
            <span class="stat-label">Card on file</span>
            <span class="stat-value">{billing.card_on_file ? `${billing.brand} •••• ${billing.last4}` : 'None'}</span>
            {billing.card_on_file ? null : <span class="muted small">Plans and forks need a card; ask your operator to add one.</span>}
          </div>
          <div class="stat card">
            <span class="stat-label">Prepaid credits</span>
            <span class="stat-value">{money(usage.credits.balance_cents)}</span>
            <span class="muted small">{money(usage.credits.spent_month_cents)} drawn this month</span>
          </div>
          <div class="stat card">
            <span class="stat-label">Monthly recurring</span>
            <span class="stat-value">{money(usage.mrr.amount_cents)}</span>
            <span class="muted small">plan VMs, annual as a twelfth</span>
          </div>
          <div class="stat card">
            <span class="stat-label">Live VMs</span>
            <span class="stat-value">{count(usage.vms.live)}</span>
            <span class="muted small">
              {count(usage.vms.running)} running · {count(usage.vms.stopped)} stopped
            </span>
          </div>
        </div>
        <section class="card stack" aria-labelledby="spend-h">
          <div class="section-head">
            <h2 id="spend-h">Spend, last {SPEND_DAYS} days</h2>
            <span class="stat-value small-value">{money(total)}</span>
          </div>
          <figure class="chart" aria-describedby="spend-table-caption">
            <div id="spend-chart" class="chart-box" data-spend={JSON.stringify(spend)} role="img" aria-label={`Bar chart of spend per day, ${money(total)} in all`}></div>
          </figure>
          <details>
            <summary>Spend as a table</summary>
            <div class="table-wrap">
              <table class="table">
                <caption id="spend-table-caption">Days with spend in the last {SPEND_DAYS} days (UTC)</caption>
                <thead>
                  <tr>
                    <th scope="col">Day</th>
                    <th scope="col">Card charges</th>
                    <th scope="col">Credits drawn</th>
                  </tr>
                </thead>
                <tbody>
                  {spentDays.length === 0 ? (
                    <tr>
                      <td colspan={3} class="empty">
                        Nothing spent in the last {SPEND_DAYS} days.
                      </td>
                    </tr>
                  ) : (
                    spentDays.map((d) => (
                      <tr>
                        <td>{d.day}</td>
                        <td>{money(d.card_cents)}</td>
                        <td>{money(d.credits_cents)}</td>
                      </tr>
                    ))
                  )}
                </tbody>
              </table>
            </div>
          </details>
        </section>
        <section class="card" aria-labelledby="mix-h">
          <h2 id="mix-h">VMs by plan and tier</h2>
          <div class="table-wrap">
            <table class="table">
              <caption class="visually-hidden">VMs and monthly price by plan and tier</caption>
              <thead>
                <tr>
                  <th scope="col">Plan or tier</th>
                  <th scope="col">VMs</th>
                  <th scope="col">Monthly</th>
                </tr>
              </thead>
              <tbody>
                {PLAN_IDS.map((p) => (
                  <tr>
                    <td>{p}</td>
                    <td>{count(usage.vms.by_plan[p])}</td>
                    <td>{money(usage.mrr.by_plan[p])}</td>
                  </tr>
                ))}
                {TIER_IDS.map((t) => (
                  <tr>
                    <td>{t} tier</td>
                    <td>{count(usage.vms.by_tier[t])}</td>
                    <td class="muted">by the hour</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      </>,
    );
  });
}
