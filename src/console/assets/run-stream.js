// Follows a run's output (or an image build's log) as server-sent events and writes it as text (never as HTML) while it comes.
'use strict';

function formatDuration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

function follow(pre) {
  const url = pre.getAttribute('data-stream');
  const source = new EventSource(url);
  let empty = true;
  const append = (text, stream) => {
    const nearBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40;
    if (empty) {
      pre.textContent = '';
      empty = false;
      // Output means the run has started, whatever the page said when it was rendered.
      const badge = document.querySelector('#run-status .status');
      if (badge && badge.getAttribute('data-status') === 'queued') {
        badge.className = 'status status-running-run';
        badge.setAttribute('data-status', 'running-run');
        badge.textContent = 'running';
      }
    }
    if (stream === 'stderr') {
      const span = document.createElement('span');
      span.className = 'stderr';
      span.textContent = text;
      pre.appendChild(span);
    } else {
      pre.appendChild(document.createTextNode(text));
    }
    if (nearBottom) pre.scrollTop = pre.scrollHeight;
  };
  source.addEventListener('stdout', (e) => append(JSON.parse(e.data).text, 'stdout'));
  source.addEventListener('stderr', (e) => append(JSON.parse(e.data).text, 'stderr'));
  // An image build's log: a line an event.
  source.addEventListener('log', (e) => append(`${JSON.parse(e.data).text}\n`, 'stdout'));
  source.addEventListener('end', (e) => {
    source.close();
    const run = JSON.parse(e.data);
    const status = document.getElementById('run-status');
    if (status) {
      const badge = document.createElement('span');
      badge.className = `status status-${run.status}`;
      badge.setAttribute('data-status', run.status);
      badge.textContent = run.status;
      status.replaceChildren(badge);
    }
    const exit = document.getElementById('run-exit');
    if (exit) exit.textContent = run.exit_code === null ? '—' : String(run.exit_code);
    const took = document.getElementById('run-duration');
    if (took) took.textContent = formatDuration(run.duration_ms);
    document.getElementById('run-progress')?.remove();
    document.getElementById('run-cancel')?.remove();
    if (empty) {
      const none = document.createElement('span');
      none.className = 'muted';
      none.textContent = '(no output)';
      pre.replaceChildren(none);
    }
    pre.setAttribute('data-finished', run.status);
  });
}

for (const pre of document.querySelectorAll('pre[data-stream]')) follow(pre);
