// The terminal page: xterm.js joined to a VM's shell socket, speaking what `agentvm vms shell` speaks. Binary
// frames are terminal bytes both ways; a text frame {"type": "resize", "cols", "rows"} follows the window's size;
// the close code says how it ended (1000 the shell exited, 4409 the VM stopped, 1001 the server stops, 1011 failed).
'use strict';

const screen = document.getElementById('terminal-screen');
const statusLine = document.getElementById('terminal-status');
const controls = document.getElementById('terminal-controls');
const reconnectButton = document.getElementById('terminal-reconnect');
const disconnectButton = document.getElementById('terminal-disconnect');
const screenReader = document.getElementById('terminal-screen-reader');

const STATES = { idle: 'status-stopped', connecting: 'status-starting', connected: 'status-running', closed: 'status-stopped', failed: 'status-failed' };

/** The status line: a word with its colour, then what happened, as text. */
function say(state, word, detail) {
  statusLine.setAttribute('data-state', state);
  const badge = document.createElement('span');
  badge.className = `status ${STATES[state]}`;
  badge.textContent = word;
  const parts = [badge];
  if (detail) {
    const text = document.createElement('span');
    text.className = 'terminal-detail';
    text.textContent = detail;
    parts.push(text);
  }
  statusLine.replaceChildren(...parts);
  reconnectButton.hidden = state !== 'closed' && state !== 'failed';
  disconnectButton.hidden = state !== 'connected';
}

/** What a close code and reason mean to the person at the keyboard (as closeOutcome in src/cli/terminal.ts). */
function closedBecause(code, reason, opened) {
  if (code === 1000) {
    if (reason === 'closed by the user') return 'You disconnected.';
    const signal = /^signal (\w+)$/.exec(reason);
    if (signal) return `The shell was killed by ${signal[1]}.`;
    return `The shell ended (${reason || 'exit 0'}).`;
  }
  if (code === 4409) return `The VM stopped: ${reason || 'vm_not_running'}.`;
  if (code === 1001) return reason ? `${reason[0].toUpperCase()}${reason.slice(1)}.` : 'The server is stopping.';
  if (code === 1011) return `The shell could not go on: ${reason || 'internal error'}.`;
  if (!opened) return 'The shell socket could not be opened (the ticket may have expired, or the VM stopped).';
  return `The connection was lost (code ${code}${reason ? `: ${reason}` : ''}).`;
}

/**
 * xterm.js makes three `<style>` elements as it opens (its renderer's sizes and colours, its scroll bar); the
 * page's Content-Security-Policy lets a `<style>` apply only with this response's nonce, which they are given as
 * they are made. Only while the terminal opens: no other code runs in between.
 */
function openWithNonce(term, element, nonce) {
  const create = document.createElement;
  document.createElement = function (name, options) {
    const made = create.call(this, name, options);
    if (String(name).toLowerCase() === 'style') made.nonce = nonce;
    return made;
  };
  try {
    term.open(element);
  } finally {
    delete document.createElement;
  }
}

/**
 * Cells in 24-bit colour get their colour as a `style` attribute set by setAttribute, which the policy refuses
 * (a nonce covers elements, not attributes). The same declarations set through the CSSOM are not inline markup:
 * on this page a span's style attribute is set that way.
 */
const setAttribute = Element.prototype.setAttribute;
HTMLSpanElement.prototype.setAttribute = function (name, value) {
  if (String(name).toLowerCase() === 'style') this.style.cssText = String(value);
  else setAttribute.call(this, name, value);
};

const [{ Terminal }, { FitAddon }] = await Promise.all([import(screen.dataset.xterm), import(screen.dataset.fit)]);
const narrow = window.matchMedia('(max-width: 760px)');
const term = new Terminal({
  cursorBlink: true,
  fontFamily: "ui-monospace, 'SFMono-Regular', Menlo, Consolas, 'Liberation Mono', 'DejaVu Sans Mono', monospace",
  fontSize: narrow.matches ? 13 : 14,
  scrollback: 5000,
  theme: { background: '#0b1020', foreground: '#e2e8f0', cursor: '#a5b4fc', selectionBackground: '#334155' },
});
const fit = new FitAddon();
term.loadAddon(fit);
openWithNonce(term, screen, screen.nonce);
if (term.textarea) term.textarea.setAttribute('aria-describedby', 'terminal-help');

// Esc then Tab leaves the terminal (Tab alone goes to the shell, for completion): the browser moves the focus.
let afterEscape = false;
term.attachCustomKeyEventHandler((event) => {
  if (event.type !== 'keydown') return true;
  if (event.key === 'Tab' && afterEscape && !event.ctrlKey && !event.altKey && !event.metaKey) {
    afterEscape = false;
    return false;
  }
  if (!['Shift', 'Control', 'Alt', 'Meta'].includes(event.key)) afterEscape = event.key === 'Escape';
  return true;
});

screenReader.addEventListener('change', () => {
  term.options.screenReaderMode = screenReader.checked;
});

let socket = null;
let userClosed = false;
const encoder = new TextEncoder();
const isOpen = () => socket !== null && socket.readyState === WebSocket.OPEN;
const send = (bytes) => isOpen() && socket.send(bytes);
term.onData((data) => send(encoder.encode(data)));
term.onBinary((data) => send(Uint8Array.from(data, (ch) => ch.charCodeAt(0) & 0xff)));
const sizeLabel = document.getElementById('terminal-size');
const showSize = () => (sizeLabel.textContent = `${term.cols} × ${term.rows}`);
term.onResize(({ cols, rows }) => {
  showSize();
  send(JSON.stringify({ type: 'resize', cols, rows }));
});

// The terminal follows its box, and the box the window.
let fitQueued = false;
const refit = () => {
  if (fitQueued) return;
  fitQueued = true;
  requestAnimationFrame(() => {
    fitQueued = false;
    if (screen.clientWidth > 0 && screen.clientHeight > 0) fit.fit();
  });
};
new ResizeObserver(refit).observe(screen);
narrow.addEventListener('change', () => {
  term.options.fontSize = narrow.matches ? 13 : 14;
  refit();
});
fit.fit();
showSize();

/** A ticket from the console (which asks the API's shell operation), with the session's CSRF token. */
async function freshSocketPath() {
  const res = await fetch(controls.action, {
    method: 'POST',
    headers: { 'x-csrf-token': controls.elements._csrf.value, accept: 'application/json' },
    credentials: 'same-origin',
  });
  let body = null;
  if ((res.headers.get('content-type') || '').includes('application/json')) body = await res.json();
  if (res.ok && body && body.socket) return body.socket;
  if (body && body.message !== undefined) {
    throw new Error(`${body.message || 'The shell could not be opened.'} (${body.error})${body.hint ? ` ${body.hint}` : ''}`);
  }
  if (res.status === 401) throw new Error('Your session has ended: sign in again.');
  throw new Error(`The console answered ${res.status}.`);
}

/** Opens a shell: with the ticket the page came with, else a fresh one. */
async function connect(socketPath) {
  if (socket) return;
  say('connecting', 'Connecting…');
  let path = socketPath;
  try {
    if (!path) path = await freshSocketPath();
  } catch (err) {
    say('failed', 'Not connected', err.message);
    return;
  }
  fit.fit();
  const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${scheme}//${window.location.host}${path}&cols=${term.cols}&rows=${term.rows}`);
  ws.binaryType = 'arraybuffer';
  socket = ws;
  let opened = false;
  ws.addEventListener('open', () => {
    opened = true;
    say('connected', 'Connected');
    term.options.disableStdin = false;
    term.focus();
  });
  ws.addEventListener('message', (event) => {
    if (event.data instanceof ArrayBuffer) term.write(new Uint8Array(event.data));
  });
  ws.addEventListener('close', (event) => {
    socket = null;
    term.options.disableStdin = true;
    const why = userClosed ? 'You disconnected.' : closedBecause(event.code, event.reason, opened);
    if (opened) term.write(`\r\n\x1b[2m[${why}]\x1b[0m\r\n`);
    say('closed', 'Closed', why);
    if (userClosed) reconnectButton.focus();
    userClosed = false;
  });
}

controls.addEventListener('submit', (event) => {
  // The console's own submit handling (a spinner until the next page) does not apply: no page comes.
  event.preventDefault();
  event.stopPropagation();
  void connect();
});
disconnectButton.addEventListener('click', () => {
  if (!socket) return;
  userClosed = true;
  socket.close(1000, 'closed by the user');
});

// The page came from "Open terminal" with a ticket: use it once, and make a reload a plain GET (a new ticket).
const first = screen.getAttribute('data-socket');
screen.removeAttribute('data-socket');
if (first) history.replaceState(null, '', window.location.pathname);
void connect(first || undefined);
