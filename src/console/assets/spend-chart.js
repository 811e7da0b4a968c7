// Draws the spend per day with uPlot from the numbers the page carries (the table below has them too).
'use strict';

(function () {
  const box = document.getElementById('spend-chart');
  if (!box || typeof uPlot === 'undefined') return;
  const days = JSON.parse(box.getAttribute('data-spend') || '[]');
  const xs = days.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000);
  // A day without spend draws no bar (null), rather than a hairline at zero.
  const card = days.map((d) => (d.card_cents ? d.card_cents / 100 : null));
  const credits = days.map((d) => (d.credits_cents ? d.credits_cents / 100 : null));
  const dollars = (v) => (v === null || v === undefined ? '—' : `$${v.toFixed(2)}`);
  const bars = (align) => uPlot.paths.bars({ size: [0.4, 40], align });
  const opts = {
    width: box.clientWidth,
    height: 220,
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true, range: (_u, min, max) => [min - 43200, max + 43200] }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.15)] } },
    axes: [
      { stroke: '#5b6472', grid: { show: false }, ticks: { stroke: '#d8dde5' } },
      { stroke: '#5b6472', values: (_u, vals) => vals.map((v) => `$${v}`), grid: { stroke: '#eef1f5' }, size: 56 },
    ],
    series: [
      { value: (_u, v) => (v ? new Date(v * 1000).toISOString().slice(0, 10) : '—') },
      { label: 'Card charges', fill: '#4f46e5', stroke: '#4f46e5', paths: bars(-1), points: { show: false }, value: (_u, v) => dollars(v) },
      { label: 'Credits drawn', fill: '#0ea5a4', stroke: '#0ea5a4', paths: bars(1), points: { show: false }, value: (_u, v) => dollars(v) },
    ],
  };
  const chart = new uPlot(opts, [xs, card, credits], box);
  new ResizeObserver(() => chart.setSize({ width: box.clientWidth, height: 220 })).observe(box);
})();
